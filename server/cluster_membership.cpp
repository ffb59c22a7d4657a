// Which cluster a server's directory belongs to (server/cluster_membership.h).
#include "server/cluster_membership.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>

namespace pagefile::net {

ClusterMembership::ClusterMembership(std::filesystem::path dir) : path_(std::move(dir) / "cluster") {}

Status ClusterMembership::load() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return Status::ok();
  std::ifstream in(path_);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  uint64_t id = 0;
  auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), id, 16);
  if (!in || err != std::errc() || end != s.data() + s.size() || id == 0) {
    return Status::corruption(path_.string(), fmt::format("is not a cluster id ({:?}): remove it only if this "
                                                          "directory is to join whatever cluster reaches it first",
                                                          s.substr(0, 40)));
  }
  cluster_ = id;
  return Status::ok();
}

Status ClusterMembership::check(uint64_t cluster) {
  if (cluster == 0) return Status::ok();
  uint64_t mine = cluster_.load(std::memory_order_relaxed);
  if (mine == cluster) return Status::ok();
  MutexLock lock(mu_);
  mine = cluster_.load();
  if (mine == 0) return record(cluster);
  if (mine == cluster) return Status::ok();
  return Status::stale(fmt::format("server {}", path_.parent_path().string()),
                       fmt::format("belongs to cluster {:016x}, not {:016x}: the file was opened before its "
                                   "cluster was created again; open it again",
                                   mine, cluster));
}

Status ClusterMembership::set(uint64_t cluster) {
  MutexLock lock(mu_);
  if (cluster_.load() == cluster) return Status::ok();
  return record(cluster);
}

Status ClusterMembership::record(uint64_t cluster) {
  // Written aside and renamed, so a crash leaves the old id or the new one.
  std::filesystem::path temp = path_;
  temp += ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << fmt::format("{:016x}\n", cluster);
    out.flush();
    if (!out) return Status::io_error(temp.string(), "cannot write the cluster id");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path_, ec);
  if (ec) return Status::io_error(path_.string(), fmt::format("rename: {}", ec.message()));
  cluster_ = cluster;
  return Status::ok();
}

}  // namespace pagefile::net
