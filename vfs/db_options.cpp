#include "vfs/db_options.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/mutex.h"
#include "core/os_error.h"
#include "pagefile/policy.h"

namespace pagefile::vfs {

Result<uint32_t> parse_count(std::string_view what, std::string_view text, uint32_t min, uint32_t max) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return Status::invalid_argument(what, fmt::format("'{}' is not a whole number in [{}, {}]", text, min, max));
  }
  return static_cast<uint32_t>(value);
}

Result<BufferPolicy> parse_policy(std::string_view name) {
  if (auto access = parse_access_type(name)) return BufferPolicy{.access = *access};
  auto builtins = PolicyRegistry::with_builtins();
  if (!builtins->contains(name)) {
    return Status::invalid_argument(
        "policy", fmt::format("'{}' is not one of {}", name, fmt::join(builtins->names(), ", ")));
  }
  return BufferPolicy{.access = AccessType::kRandom, .name = std::string(name)};
}

Location default_location(std::string_view bus) {
  const char* env = std::getenv("PAGEFILE_BUS");
  bool configured = !bus.empty() || (env != nullptr && *env != '\0');
  return configured ? Location::kRemote : Location::kLocal;
}

DbOptions default_db_options() {
  DbOptions o;
  o.location = default_location(o.bus);
  return o;
}

Result<DbOptions> parse_db_options(const ParamGetter& param) {
  DbOptions o;
  if (const char* v = param("bus")) o.bus = v;
  o.location = default_location(o.bus);
  if (const char* v = param("location")) {
    std::string_view s(v);
    if (s == "local") {
      o.location = Location::kLocal;
    } else if (s == "remote") {
      o.location = Location::kRemote;
    } else {
      return Status::invalid_argument("location", fmt::format("'{}' is neither local nor remote", s));
    }
  }
  if (const char* v = param("concurrency")) {
    auto n = parse_count("concurrency", v, 1, 1024);
    if (!n) return n.status();
    o.concurrency = *n;
  }
  if (const char* v = param("page_size")) {
    auto n = parse_count("page_size", v, kMinPageSize, kMaxPageSize);
    if (!n) return n.status();
    if (Status s = check_page_size(*n); !s) return s;
    o.page_size = *n;
  }
  if (const char* v = param("placement")) {
    auto p = parse_placement(v);
    if (!p) return p.status().with_context("placement");
    o.placement = *p;
    o.placement_given = true;
  }
  if (const char* v = param("stripe_pages")) {
    auto n = parse_count("stripe_pages", v, 1, 1u << 20);
    if (!n) return n.status();
    o.stripe_pages = *n;
    o.placement_given = true;
  }
  if (const char* v = param("servers")) {
    auto n = parse_count("servers", v, 0, 1024);
    if (!n) return n.status();
    o.servers = *n;
    o.placement_given = true;
  }
  if (const char* v = param("replicas")) {
    auto n = parse_count("replicas", v, 1, kMaxReplicas);
    if (!n) return n.status();
    o.replicas = *n;
  }
  if (const char* v = param("policy")) {
    auto p = parse_policy(v);
    if (!p) return p.status();
    o.policy = *p;
  }
  if (const char* v = param("checksums")) {
    auto on = parse_on_off("checksums", v);
    if (!on) return on.status();
    o.checksums = *on;
  }
  if (const char* v = param("trace")) {
    if (*v == '\0') return Status::invalid_argument("trace", "an empty path");
    o.trace = v;
  }
  if (const char* v = param("timeout_ms")) {
    auto n = parse_count("timeout_ms", v, 1, 24u * 3600 * 1000);
    if (!n) return n.status();
    o.timeout_ms = *n;
  }
  if (const char* v = param("cache_pages")) {
    auto n = parse_count("cache_pages", v, 0, 1u << 30);
    if (!n) return n.status();
    BufferPolicy p = o.policy.value_or(BufferPolicy{});
    p.max_pages = *n;
    o.policy = p;
    o.cache_pages = *n;
  }
  return o;
}

namespace {

// True when `path` is already as store_name would write it: no empty, "."
// or ".." part and no '/' at the end. SQLite asks with the same normal path
// at every transaction (xAccess of the journal): it is answered without
// taking the path apart.
bool is_normal(std::string_view path) {
  size_t i = path.front() == '/' ? 1 : 0;
  if (i == path.size()) return false;  // "/"
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") return false;
    i = j + 1;
  }
  return true;
}

// The absolute names full_pathname made, each with the relative name it
// was made of; and of those, the remote databases' (open_remote, or all
// where databases are remote by default), whose store names are the
// relative ones. Only ever added to: one entry per
// relative name and working directory a process opens databases by.
class MadeAbsolute {
 public:
  static MadeAbsolute& instance() {
    static MadeAbsolute* made = new MadeAbsolute;  // never destroyed: used until exit
    return *made;
  }
  // `remote`: the process's databases are remote unless told otherwise,
  // so the name is a remote database's at once.
  void add(const std::string& absolute, const std::string& relative, bool remote) {
    MutexLock lock(mu_);
    bool added = made_.try_emplace(absolute, relative).second;
    if (remote && !local_.contains(database_of(absolute))) {
      added = active_.try_emplace(absolute, relative).second || added;
      any_active_.store(true, std::memory_order_release);
    }
    if (added) names_changed();
  }
  // A database opened local: its name, and those SQLite makes of it, stay
  // absolute, even where the process's databases are remote by default.
  // kInvalidArgument when this process opened it remote.
  Status open_local(const std::string& absolute) {
    MutexLock lock(mu_);
    if (Status s = check_one_way(absolute, /*remote=*/false); !s) return s;
    local_.insert(absolute);
    active_.erase(absolute);
    for (const std::string_view suffix : {"-journal", "-wal"}) active_.erase(absolute + std::string(suffix));
    names_changed();
    return Status::ok();
  }
  // A database opened remote: the relative name it was made of, if it
  // was; kInvalidArgument when this process opened it local.
  Result<std::optional<std::string>> open_remote(const std::string& absolute) {
    MutexLock lock(mu_);
    if (Status s = check_one_way(absolute, /*remote=*/true); !s) return s;
    opened_remote_.insert(absolute);
    names_changed();
    auto it = made_.find(absolute);
    if (it == made_.end()) return std::optional<std::string>();
    active_.try_emplace(absolute, it->second);
    any_active_.store(true, std::memory_order_release);
    return std::optional<std::string>(it->second);
  }
  // The relative name of `name` (a normal absolute path) when it is an
  // active database's, or a journal, WAL or super-journal of one (with
  // its suffix).
  std::optional<std::string> relative(const std::string& name) const {
    if (!any_active_.load(std::memory_order_acquire)) return std::nullopt;
    MutexLock lock(mu_);
    if (auto it = active_.find(name); it != active_.end()) return it->second;
    std::string database = database_of(name);
    auto it = active_.find(database);
    if (it == active_.end()) return std::nullopt;
    return it->second + name.substr(database.size());
  }

 private:
  std::atomic<bool> any_active_{false};
  mutable Mutex mu_;
  std::unordered_map<std::string, std::string> made_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::string> active_ GUARDED_BY(mu_);
  std::unordered_set<std::string> local_ GUARDED_BY(mu_);          // opened local
  std::unordered_set<std::string> opened_remote_ GUARDED_BY(mu_);  // opened remote

  // One path is one database of this process, local or remote: its
  // journals' and WAL's names could not say whose they are.
  Status check_one_way(const std::string& absolute, bool remote) const REQUIRES(mu_) {
    if (remote ? !local_.contains(absolute) : !opened_remote_.contains(absolute)) return Status::ok();
    return Status::invalid_argument(
        absolute, fmt::format("this process opened it {} already: a path names one database of a process, local "
                              "or remote (location=, bus=)",
                              remote ? "local" : "remote"));
  }
};

// store_name, without going back to a relative name.
Result<std::string> lexical_name(std::string_view path) {
  if (path.empty()) return Status::invalid_argument("path", "is empty");
  if (is_normal(path)) return std::string(path);
  bool absolute = path.front() == '/';
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }  // (else "/.." is "/", as on unix)
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    i = j + 1;
  }
  std::string out = absolute ? "/" : "";
  for (size_t k = 0; k < parts.size(); ++k) {
    if (k > 0) out += '/';
    out += parts[k];
  }
  if (out.empty()) return Status::invalid_argument(path, "names no file");
  return out;
}

}  // namespace

Result<std::string> store_name(std::string_view path) {
  // Named as xFullPathname names it, so that every way of naming a file
  // (SQLite's, the SQL functions', a direct caller's) meets the same name.
  auto name = full_pathname(path);
  if (!name) return name;
  if (auto relative = MadeAbsolute::instance().relative(*name)) return *relative;
  return name;
}

Result<std::string> database_store_name(const std::string& sqlite_name, const std::string& name, bool remote) {
  auto absolute = lexical_name(sqlite_name);
  if (!absolute || absolute->front() != '/') return name;  // (a direct caller's relative name)
  if (!remote) {
    if (Status s = MadeAbsolute::instance().open_local(*absolute); !s) return s;
    return *absolute;
  }
  auto relative = MadeAbsolute::instance().open_remote(*absolute);
  if (!relative) return relative.status();
  return relative->value_or(name);
}

namespace {

// `path` (absolute) with each symbolic link among its parts replaced by
// what it points to, part by part from the root, ".." taking away the
// part resolved before it: unixFullPathname's walk (os_unix.c), with its
// limit of 100 links. A part that does not exist ends nothing: the rest
// is taken as it stands. *followed says whether a link was.
Result<std::string> resolve_links(const std::string& path, bool* followed) {
  constexpr int kMaxLinks = 100;  // (SQLITE_MAX_SYMLINK)
  std::vector<std::string> todo;  // parts left, the next at the back
  auto push_parts = [&todo](std::string_view of) {
    std::vector<std::string> parts;
    size_t i = 0;
    while (i <= of.size()) {
      size_t j = of.find('/', i);
      if (j == std::string_view::npos) j = of.size();
      if (j > i) parts.emplace_back(of.substr(i, j - i));
      i = j + 1;
    }
    todo.insert(todo.end(), parts.rbegin(), parts.rend());
  };
  push_parts(path);
  std::string out;  // resolved so far; "" is the root
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == ".") continue;
    if (part == "..") {
      out.resize(out.empty() ? 0 : out.rfind('/'));
      continue;
    }
    std::string at = out + "/" + part;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) return errno_status(errno, at, "lstat");
    } else if (S_ISLNK(st.st_mode)) {
      if (++links > kMaxLinks) return errno_status(ELOOP, path, "resolving its symbolic links");
      std::string target(PATH_MAX, '\0');
      ssize_t n = ::readlink(at.c_str(), target.data(), target.size());
      if (n < 0) return errno_status(errno, at, "readlink");
      target.resize(static_cast<size_t>(n));
      if (!target.empty() && target.front() == '/') out.clear();
      push_parts(target);
      *followed = true;
      continue;
    }
    out = std::move(at);
  }
  return out.empty() ? std::string("/") : out;
}

}  // namespace

Result<std::string> full_pathname(std::string_view path, bool* followed) {
  auto name = lexical_name(path);
  std::string relative;
  std::string raw(path);
  if (!path.empty() && path.front() != '/') {
    std::string cwd(4096, '\0');
    if (::getcwd(cwd.data(), cwd.size()) == nullptr) return errno_status(errno, "working directory", "getcwd");
    cwd.resize(std::strlen(cwd.c_str()));
    if (name) relative = *name;
    raw = cwd + "/" + raw;
    if (!followed) name = name ? lexical_name(raw) : name;
  }
  if (followed) {
    // From the path as given: a ".." after a link goes up from where the
    // link leads, as unix's walk does, not from the link's own directory.
    if (path.empty()) return name;  // (its error)
    *followed = false;
    name = resolve_links(raw, followed);
  }
  if (!name) return name;
  // (A relative name with ".." may climb above the working directory: its
  // absolute name is still one file, and gives it back.)
  if (!relative.empty()) MadeAbsolute::instance().add(*name, relative, default_location("") == Location::kRemote);
  return name;
}

namespace {
std::atomic<uint64_t> g_names_generation{1};  // (0 is no generation: NameMemo)
}  // namespace

uint64_t names_generation() { return g_names_generation.load(std::memory_order_acquire); }
void names_changed() { g_names_generation.fetch_add(1, std::memory_order_acq_rel); }

std::string database_of(std::string_view name) {
  for (std::string_view suffix : {"-journal", "-wal"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      return std::string(name.substr(0, name.size() - suffix.size()));
    }
  }
  // Super-journals are "<db>-mj" and nine hexadecimal digits (vdbeaux.c:
  // "-mj%06X9%02X"); any other "-mj" is part of a database's name.
  constexpr size_t kSuperSuffix = 3 + 9;
  if (name.size() > kSuperSuffix && name.substr(name.size() - kSuperSuffix, 3) == "-mj") {
    std::string_view digits = name.substr(name.size() - 9);
    bool hex = std::all_of(digits.begin(), digits.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
    });
    if (hex) return std::string(name.substr(0, name.size() - kSuperSuffix));
  }
  return std::string(name);
}

}  // namespace pagefile::vfs
