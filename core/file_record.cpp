// The catalog's record of one Pagefile (core/file_record.h).
#include "core/file_record.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/page_bounds.h"

namespace pagefile {

namespace {

bool is_known_placement(Placement kind) {
  return kind == Placement::kStripe || kind == Placement::kHash;
}

}  // namespace

CopyState copy_state(const FileRecord& record, std::string_view server) {
  if (std::find(record.stale.begin(), record.stale.end(), server) != record.stale.end()) return CopyState::kStale;
  if (std::find(record.resyncing.begin(), record.resyncing.end(), server) != record.resyncing.end()) {
    return CopyState::kResyncing;
  }
  return CopyState::kCurrent;
}

Status check_file_record(const FileRecord& r) {
  if (r.name.empty()) return Status::invalid_argument("file name", "is empty");
  if (r.name.find('\0') != std::string::npos) {
    return Status::invalid_argument("file name", "contains a NUL byte");
  }
  if (Status s = check_page_size(r.page_size); !s) return s.with_context(r.name);
  if (Status s = check_size_pages(r.size_pages, r.name); !s) return s;
  if (!is_known_placement(r.placement)) {
    return Status::invalid_argument(
        r.name, fmt::format("placement {} is not stripe or hash", static_cast<unsigned>(r.placement)));
  }
  if (r.stripe_pages < 1) return Status::invalid_argument(r.name, "stripe_pages must be at least 1");
  if (r.servers.empty()) return Status::invalid_argument(r.name, "server list is empty");
  for (const auto& server : r.servers) {
    // Stored one per line, so an empty one or one with a newline would not
    // come back as it went in.
    if (server.empty()) return Status::invalid_argument(r.name, "a server address is empty");
    if (server.find('\n') != std::string::npos) {
      return Status::invalid_argument(r.name,
                                      fmt::format("server address '{}' contains a newline", server));
    }
  }
  if (Status s = check_replicas(r.replicas, r.servers.size()); !s) return s.with_context(r.name);
  for (const auto* set : {&r.stale, &r.resyncing}) {
    for (const auto& server : *set) {
      if (std::find(r.servers.begin(), r.servers.end(), server) == r.servers.end()) {
        return Status::invalid_argument(r.name, fmt::format("server {} with copies not current is not one of its servers", server));
      }
    }
  }
  if (!r.placement_keys.empty() && r.placement_keys.size() != r.servers.size()) {
    return Status::invalid_argument(r.name, fmt::format("{} placement keys for {} servers", r.placement_keys.size(),
                                                        r.servers.size()));
  }
  if (!r.directories.empty() && r.directories.size() != r.servers.size()) {
    return Status::invalid_argument(r.name, fmt::format("{} directories for {} servers", r.directories.size(),
                                                        r.servers.size()));
  }
  if (copies_not_current(r) >= r.replicas) {
    return Status::invalid_argument(
        r.name, fmt::format("{} servers' copies are not current, of {} copies: some pages would have none",
                            copies_not_current(r), r.replicas));
  }
  if (!parse_access_type(access_type_name(r.policy.access))) {
    return Status::invalid_argument(
        r.name, fmt::format("access type {} is not a type", static_cast<unsigned>(r.policy.access)));
  }
  if (Status s = check_buffer_policy(r.policy); !s) return s.with_context(r.name);
  return Status::ok();
}

Result<std::optional<FileRecord>> with_copy_state(const FileRecord& record, const std::string& server,
                                                  CopyState state) {
  if (std::find(record.servers.begin(), record.servers.end(), server) == record.servers.end()) {
    return Status::invalid_argument(record.name, fmt::format("server {} is not one of its servers", server));
  }
  if (copy_state(record, server) == state) return std::optional<FileRecord>();
  if (state == CopyState::kCurrent && copy_state(record, server) != CopyState::kResyncing) {
    return Status::stale(record.name, fmt::format("the copies on {} were left behind again during resync", server));
  }
  FileRecord next = record;
  std::erase(next.stale, server);
  std::erase(next.resyncing, server);
  if (state == CopyState::kStale) next.stale.push_back(server);
  if (state == CopyState::kResyncing) next.resyncing.push_back(server);
  next.replica_version = record.replica_version + 1;
  if (copies_not_current(next) >= next.replicas) {
    return Status::io_error(record.name, fmt::format("the copies on {} cannot be left behind: with {} of its {} "
                                                     "copies not current, some pages would have none",
                                                     server, copies_not_current(next), next.replicas));
  }
  return std::optional<FileRecord>(std::move(next));
}

Status check_replacement(const std::string& old_server, const std::string& new_server) {
  if (new_server.empty() || new_server.find('\n') != std::string::npos) {
    return Status::invalid_argument(fmt::format("server {}", new_server), "cannot replace " + old_server);
  }
  return Status::ok();
}

Result<std::optional<FileRecord>> with_server_replaced(const FileRecord& record, const std::string& old_server,
                                                       const std::string& new_server) {
  FileRecord r = record;
  auto at = std::find(r.servers.begin(), r.servers.end(), old_server);
  if (at == r.servers.end()) return std::optional<FileRecord>();
  if (r.replicas == 1) {
    return Status::invalid_argument(
        r.name, old_server == new_server
                    ? fmt::format("keeps one copy of each page, and its pages on {} are lost with its directory "
                                  "(restore the directory, or remove the file and import it from a backup)",
                                  old_server)
                    : fmt::format("keeps one copy of each page: replacing {} would lose its pages (export and "
                                  "import the file instead)",
                                  old_server));
  }
  if (old_server == new_server) {
    // A new directory at the same address: its copies there are gone.
    if (copy_state(r, old_server) == CopyState::kStale) return std::optional<FileRecord>();
    std::erase(r.resyncing, old_server);
    r.stale.push_back(old_server);
    r.replica_version++;
    if (copies_not_current(r) >= r.replicas) {
      return Status::io_error(r.name, fmt::format("its copies on {} are the only current ones of some pages",
                                                  old_server));
    }
    return std::optional<FileRecord>(std::move(r));
  }
  if (std::find(r.servers.begin(), r.servers.end(), new_server) != r.servers.end()) {
    return Status::invalid_argument(r.name, fmt::format("{} is one of its servers already", new_server));
  }
  if (r.placement_keys.empty()) r.placement_keys = r.servers;
  *at = new_server;
  std::erase(r.stale, old_server);
  std::erase(r.resyncing, old_server);
  r.stale.push_back(new_server);
  r.replica_version++;
  if (copies_not_current(r) >= r.replicas) {
    return Status::io_error(r.name, fmt::format("its copies on {} are the only current ones of some pages", old_server));
  }
  return std::optional<FileRecord>(std::move(r));
}

}  // namespace pagefile
