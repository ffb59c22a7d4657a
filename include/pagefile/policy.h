// Buffer policies: what a file's policy decides for the buffer pool, and the
// registry through which a policy is chosen by name (TOPs section 2.1.4).
//
// A policy decides four things for one open file and nothing else:
//   allocation   how many pages the file would like to hold (the pool keeps
//                it between the file's min_pages and max_pages);
//   replacement  which of the file's pages to evict when room is needed;
//   prefetch     which pages to fetch ahead after a page is used, and which
//                pages already used to let go of at once (toss-immediately);
//   pinning      which pages stay in memory whatever happens (on top of the
//                pages a program pins through Client::pin).
// The pool does the rest: it holds the pages, counts hits and misses, never
// offers a pinned page for eviction, and does all I/O. A policy sees page
// numbers only, so the same policies serve the client's pool and a server's.
//
// Built-in policies, registered under these names by register_builtin_policies:
//   "random"      LRU replacement, no read-ahead, wants max_pages.
//   "sequential"  reads ahead up to read_ahead pages past the page used,
//                 tosses each page once it has been used (a scan does not
//                 come back) and evicts most-recently-used when pressed;
//                 wants only its read-ahead window.
//   "looping"     keeps the whole loop when it fits (wants max_pages); when
//                 it does not, evicts most-recently-used, so the pages that
//                 stayed hit on every pass. Worked example, a loop over N+1
//                 pages through N frames: LRU evicts each page just before it
//                 comes round again and never hits; MRU misses the first pass,
//                 then hits N (N-1 once every N passes) of the N+1 on every
//                 pass: the page it misses walks back by one a pass.
//   "global-sequential"  a file several clients scan together, each its own
//                 pages: the servers read ahead for all of them, keep the
//                 pages fetched ahead until read and toss each page once
//                 read (TOPs 2.2). On a client it is "random" (LRU, no
//                 read-ahead): a client's own read-ahead would fetch the
//                 other clients' pages.
//
// A custom policy is a PagePolicy subclass registered under a new name:
//
//   auto policies = pagefile::PolicyRegistry::with_builtins();
//   policies->add("clock", [](const pagefile::PolicyLimits&) {
//     return std::make_unique<ClockPolicy>();
//   });
//   auto client = pagefile::Client::start({.cache_pages = 256, .policies = policies});
//   client->open("t", {.policy = pagefile::BufferPolicy{.name = "clock"}});
//
// Thread-safety: a PagePolicy is called by one pool under the pool's lock and
// needs no locking of its own. A PolicyRegistry is thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagefile/status.h"

namespace pagefile {

// The bounds a file's policy works within, fixed when the file joins a pool.
struct PolicyLimits {
  uint32_t min_pages = 0;   // pages the file keeps even when others want room
  uint32_t max_pages = 0;   // most pages it may hold; 0 (no maximum set) is
                            // replaced by the pool's size before any call
                            // to the policy
  uint32_t read_ahead = 0;  // most pages it may have in flight ahead of use:
                            // the file's concurrency level
};

class PagePolicy {
 public:
  virtual ~PagePolicy() = default;

  // Allocation: how many pages the file wants to hold. The pool clamps the
  // answer to [min_pages, max_pages].
  virtual uint32_t wanted_pages(const PolicyLimits& limits) const = 0;

  // The page entered the pool: fetched for a miss, written, or (with
  // `prefetched`) fetched ahead of use.
  virtual void admitted(int64_t page, bool prefetched) = 0;
  // The program read or wrote the page, which is in the pool.
  virtual void referenced(int64_t page) = 0;
  // The page left the pool, whoever decided it (eviction, toss, truncate,
  // close, an explicit drop).
  virtual void removed(int64_t page) = 0;

  // Replacement: one of the file's pages for which `evictable` is true, or
  // nullopt when it holds none (every page pinned).
  virtual std::optional<int64_t> victim(const std::function<bool(int64_t)>& evictable) = 0;

  // Toss-immediately: pages the pool should let go of now that the program
  // has used `page`. Pinned pages among them stay. Must not change the
  // policy's state: the pool also asks it before keeping a page, and does
  // not keep one that would be let go of at once.
  virtual std::vector<int64_t> passed(int64_t /*page*/) { return {}; }

  // Prefetch: pages to fetch after the program used `page`, nearest first.
  // The pool skips pages it holds or is fetching, and fetches no more than
  // limits.read_ahead at once; the client asks for none past the end of the
  // file as it last saw it.
  virtual std::vector<int64_t> read_ahead(int64_t /*page*/, const PolicyLimits& /*limits*/) {
    return {};
  }

  // Pinning: pages the policy itself keeps in memory (never evicted, never
  // tossed). Pins made through the pool come on top.
  virtual bool pinned(int64_t /*page*/) const { return false; }
};

// Makes the policy of one open file.
using PolicyMaker = std::function<std::unique_ptr<PagePolicy>(const PolicyLimits& limits)>;

// Policies by name. The built-ins are registered with the same add() call a
// custom policy uses, and a file selects either kind the same way: by the
// name in its BufferPolicy.
class PolicyRegistry {
 public:
  PolicyRegistry();
  ~PolicyRegistry();
  PolicyRegistry(const PolicyRegistry&) = delete;
  PolicyRegistry& operator=(const PolicyRegistry&) = delete;

  // A registry holding the built-in policies.
  static std::shared_ptr<PolicyRegistry> with_builtins();

  // Registers `make` under `name`. Fails with kInvalidArgument for a name
  // check_policy_name refuses or an empty maker, kAlreadyExists when the
  // name is taken.
  Status add(std::string_view name, PolicyMaker make);

  bool contains(std::string_view name) const;

  // A new policy for one file. kNotFound when no policy has that name;
  // kInvalidArgument when the maker returns none.
  Result<std::unique_ptr<PagePolicy>> make(std::string_view name, const PolicyLimits& limits) const;

  // The registered names, sorted.
  std::vector<std::string> names() const;

 private:
  struct Impl;  // the makers by name, under a lock
  std::unique_ptr<Impl> impl_;
};

// Adds "random", "sequential", "looping" and "global-sequential" (on a
// client the same as random; the servers read ahead for it) to `registry`.
Status register_builtin_policies(PolicyRegistry& registry);

}  // namespace pagefile
