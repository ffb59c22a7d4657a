#include "bus/bus_config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "pagefile/options.h"

namespace pagefile::net {

namespace {

std::vector<std::string> split_entries(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream words(line);
    std::string word;
    while (words >> word) out.push_back(word);
  }
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The TlsOptions field an entry "NAME=PATH" sets, or null when the entry
// is not one of them.
std::string* tls_option(TlsOptions& tls, const std::string& entry) {
  for (size_t i = 0; i < std::size(kTlsBusOptions); ++i) {
    std::string_view name = kTlsBusOptions[i];
    if (entry.size() <= name.size() || entry.compare(0, name.size(), name) != 0 || entry[name.size()] != '=') continue;
    switch (i) {
      case 0: return &tls.psk_files.emplace_back();
      case 1: return &tls.cert;
      case 2: return &tls.key;
      default: return &tls.ca;
    }
  }
  return nullptr;
}

}  // namespace

Result<BusConfig> parse_bus(std::string_view spec, const std::filesystem::path& home) {
  std::string text(spec);
  if (!spec.empty() && spec.front() == '@') {
    // @PATH, perhaps followed by ",OPTIONS" (as the tools' --psk-file adds).
    const size_t comma = spec.find(',');
    const std::string path(spec.substr(1, comma == std::string_view::npos ? std::string_view::npos : comma - 1));
    std::ifstream in{path};
    if (!in) return Status::not_found(path, "cannot read bus file");
    std::ostringstream all;
    all << in.rdbuf();
    text = all.str();
    if (comma != std::string_view::npos) text += "\n" + std::string(spec.substr(comma + 1));
  }
  BusConfig config;
  config.home = home;
  bool catalog_named = false;
  for (std::string entry : split_entries(text)) {
    bool is_catalog = false;
    if (entry.rfind("checksums=", 0) == 0) {
      auto on = parse_on_off("checksums", entry.substr(10));
      if (!on) return on.status().with_context("bus");
      config.checksums = *on;
      continue;
    }
    if (entry.rfind("replicas=", 0) == 0) {
      std::string_view count = std::string_view(entry).substr(9);
      if (!all_digits(count) || count.size() > 2) {
        return Status::invalid_argument("bus", fmt::format("replicas='{}' is not a count", count));
      }
      config.replicas = static_cast<uint32_t>(std::atoi(entry.c_str() + 9));
      continue;
    }
    // Paths, as the tools' --psk-file and --tls-* name them.
    if (std::string* path = tls_option(config.tls, entry)) {
      *path = entry.substr(entry.find('=') + 1);
      if (path->empty()) return Status::invalid_argument("bus", fmt::format("{} names no file", entry));
      continue;
    }
    if (entry.rfind("catalog=etcd://", 0) == 0) {
      auto members = parse_etcd_members(std::string_view(entry).substr(8));
      if (!members) return members.status().with_context("bus");
      config.etcd.insert(config.etcd.end(), members->begin(), members->end());
      continue;
    }
    if (entry.rfind("catalog=", 0) == 0) {
      if (catalog_named) return Status::invalid_argument("bus", "names two catalogs");
      entry = entry.substr(8);
      is_catalog = catalog_named = true;
    }
    if (entry.rfind("inproc:", 0) == 0 && all_digits(entry.substr(7))) {
      int n = std::atoi(entry.c_str() + 7);
      if (n < 1 || n > 64) {
        return Status::invalid_argument(entry, "in-process server count must be 1 to 64");
      }
      for (int i = 0; i < n; ++i) {
        Address a;
        a.kind = Address::Kind::kInproc;
        a.path = fmt::format("server-{}", config.embedded.size());
        if (is_catalog && i == 0) config.catalog = config.servers.size();
        config.servers.push_back(a);
        config.embedded.push_back(a);
      }
      continue;
    }
    auto address = parse_address(entry);
    if (!address) return address.status().with_context("bus");
    if (is_catalog) config.catalog = config.servers.size();
    config.servers.push_back(*address);
  }
  if (config.servers.empty()) return Status::invalid_argument("bus", "names no servers");
  if (catalog_named && !config.etcd.empty()) {
    return Status::invalid_argument("bus", "names two catalogs (a server and one on etcd)");
  }
  if (Status s = check_replicas(config.replicas, config.servers.size()); !s) return s.with_context("bus");
  const bool any_tls = std::any_of(config.servers.begin(), config.servers.end(),
                                   [](const Address& a) { return a.kind == Address::Kind::kTls; });
  if (any_tls && config.tls.psk_files.empty() && config.tls.ca.empty()) {
    return Status::invalid_argument("bus", "names tls:// servers but no psk_file= or tls_ca= to trust them by");
  }
  for (size_t i = 0; i < config.servers.size(); ++i) {
    for (size_t j = i + 1; j < config.servers.size(); ++j) {
      if (config.servers[i] == config.servers[j]) {
        return Status::invalid_argument("bus", fmt::format("names {} twice", config.servers[i].text()));
      }
    }
  }
  return config;
}

Result<BusConfig> resolve_bus(std::string_view spec, const std::filesystem::path& home) {
  std::filesystem::path root = home;
  if (root.empty()) {
    const char* env = std::getenv("PAGEFILE_HOME");
    root = env && *env ? std::filesystem::path(env) : std::filesystem::path("pagefile-home");
  }
  if (!spec.empty()) return parse_bus(spec, root);
  if (const char* env = std::getenv("PAGEFILE_BUS"); env && *env) {
    auto config = parse_bus(env, root);
    if (!config) return config.status().with_context("PAGEFILE_BUS");
    return config;
  }
  return parse_bus(kDefaultBus, root);
}

std::string BusConfig::catalog_name() const {
  if (etcd.empty()) return servers.at(catalog).text();
  return fmt::format("etcd://{}", fmt::join(etcd, ","));
}

Result<std::vector<std::string>> parse_etcd_members(std::string_view text) {
  std::vector<std::string> out;
  if (text.rfind("etcd://", 0) != 0) {
    return Status::invalid_argument(fmt::format("catalog '{}'", text), "is not etcd://HOST:PORT[,HOST:PORT...]");
  }
  for (std::string entry : split_entries(std::string(text))) {
    if (entry.rfind("etcd://", 0) == 0) entry = entry.substr(7);
    auto colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size() ||
        !all_digits(std::string_view(entry).substr(colon + 1)) || entry.find('/') != std::string::npos) {
      return Status::invalid_argument(fmt::format("etcd member '{}'", entry), "is not HOST:PORT");
    }
    if (std::find(out.begin(), out.end(), entry) != out.end()) {
      return Status::invalid_argument(fmt::format("etcd member {}", entry), "is named twice");
    }
    out.push_back(std::move(entry));
  }
  if (out.empty()) return Status::invalid_argument(fmt::format("catalog '{}'", text), "names no etcd member");
  return out;
}

}  // namespace pagefile::net
