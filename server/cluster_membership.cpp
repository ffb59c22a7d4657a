// Which cluster a server's directory belongs to, and which directory it is
// (server/cluster_membership.h).
#include "server/cluster_membership.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "core/random_id.h"

namespace pagefile::net {

namespace {

// The hexadecimal id in `text`; 0 when it is not one.
uint64_t parse_id(std::string_view text) {
  uint64_t id = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), id, 16);
  return err == std::errc() && end == text.data() + text.size() ? id : 0;
}

// Writes `text` to `path` durably: aside, synced, renamed, and the
// directory synced, so that a crash leaves the old file or the new one.
Status write_durably(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path temp = path;
  temp += ".tmp";
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::io_error(temp.string(), fmt::format("cannot create: {}", std::strerror(errno)));
  errno = 0;
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  int error = errno != 0 ? errno : ENOSPC;  // (a short write sets none: the disk is full)
  ::close(fd);
  if (!written) {
    ::unlink(temp.c_str());
    return Status::io_error(temp.string(), fmt::format("cannot write: {}", std::strerror(error)));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temp.c_str());
    return Status::io_error(path.string(), fmt::format("rename: {}", std::strerror(error)));
  }
  int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::io_error(path.parent_path().string(), std::strerror(errno));
  int synced = ::fsync(dir);
  ::close(dir);
  if (synced != 0) return Status::io_error(path.parent_path().string(), fmt::format("fsync: {}", std::strerror(errno)));
  return Status::ok();
}

}  // namespace

ClusterMembership::ClusterMembership(std::filesystem::path dir) : path_(std::move(dir) / "cluster") {}

Status ClusterMembership::load() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return Status::ok();
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const size_t newline = s.find('\n');
  const uint64_t cluster = parse_id(std::string_view(s).substr(0, newline));
  const uint64_t directory = newline == std::string::npos ? 0 : parse_id(std::string_view(s).substr(newline + 1));
  if (!in || cluster == 0 || (newline != std::string::npos && directory == 0)) {
    return Status::corruption(path_.string(), fmt::format("is not a cluster id and a directory id ({:?}): remove it "
                                                          "only if this directory is to join whatever cluster "
                                                          "reaches it first",
                                                          s.substr(0, 40)));
  }
  MutexLock lock(mu_);
  directory_ = directory;
  if (directory == 0) return record(cluster);  // (written before directory ids: given one now)
  cluster_ = cluster;
  return Status::ok();
}

Status ClusterMembership::lost(uint64_t directory) const {
  const std::string dir = path_.parent_path().string();
  const uint64_t mine = directory_.load();
  return Status::io_error(
      fmt::format("server {}", dir),
      mine == 0 ? fmt::format("holds no cluster's pages, but the catalog knows directory {:016x} at this address: "
                              "this directory was emptied or replaced, or its disk is not mounted, so the pages "
                              "it held are not here",
                              directory)
                : fmt::format("is directory {:016x}, not {:016x} that the catalog knows at this address: it was "
                              "replaced, or another server's directory is served here, so the pages it held are "
                              "not here",
                              mine, directory));
}

Status ClusterMembership::check(uint64_t cluster, uint64_t directory) {
  if (cluster == 0) return Status::ok();
  if (serves(cluster, directory)) return Status::ok();
  MutexLock lock(mu_);
  uint64_t mine = cluster_.load();
  if (mine == 0) {
    if (directory != 0) return lost(directory);
    return record(cluster);
  }
  if (mine != cluster) {
    return Status::stale(fmt::format("server {}", path_.parent_path().string()),
                         fmt::format("belongs to cluster {:016x}, not {:016x}: the file was opened before its "
                                     "cluster was created again; open it again",
                                     mine, cluster));
  }
  if (directory != 0 && directory != directory_.load()) return lost(directory);
  return Status::ok();
}

Result<uint64_t> ClusterMembership::join(uint64_t cluster) {
  if (cluster == 0) return Status::invalid_argument("join", "names no cluster");
  if (Status s = check(cluster, 0); !s) return s;
  return directory();
}

Status ClusterMembership::set(uint64_t cluster) {
  MutexLock lock(mu_);
  if (cluster_.load() == cluster) return Status::ok();
  return record(cluster);
}

Status ClusterMembership::record(uint64_t cluster) {
  uint64_t directory = directory_.load();
  if (directory == 0) directory = random_id();
  if (Status s = write_durably(path_, fmt::format("{:016x}\n{:016x}\n", cluster, directory)); !s) return s;
  directory_ = directory;
  cluster_ = cluster;
  return Status::ok();
}

}  // namespace pagefile::net
