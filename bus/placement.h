// Placement: which of a file's servers holds a page. Computed by the
// client from the file's catalog record; no table is looked up per page.
//
// stripe (TOPs): round-robin in units of `stripe_pages`:
//   server(page) = (page / stripe_pages) mod n
//   e.g. stripe_pages 2 over 3 servers: pages 0,1 -> s0; 2,3 -> s1; 4,5 -> s2; 6,7 -> s0.
//
// hash (RAMA): rendezvous hashing of the unit (file id, page / stripe_pages):
//   server(page) = argmax_i H(seed_i, file id, unit)   seed_i = H(address_i)
// Every unit picks the server with the highest score, so adding a server
// moves only the units that now score highest there (about 1/(n+1) of them)
// and removing one moves only its own units; nothing else changes.
//
// Replicas (R copies of each page) go to R distinct servers: under stripe
// the unit's server and the R - 1 after it (mod n); under hash the R
// highest scores. Either way the copies of one server's units are spread
// over several others (stripe: its R - 1 neighbours on each side), so the
// load of a dead server falls on more than one.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/file_record.h"

namespace pagefile::net {

// The servers holding one page's copies, the first copy first.
struct ReplicaSet {
  std::array<uint32_t, kMaxReplicas> index{};  // into the file's server list
  uint32_t count = 0;
  const uint32_t* begin() const { return index.data(); }
  const uint32_t* end() const { return index.data() + count; }
};

class PagePlacement {
 public:
  // REQUIRES: !servers.empty(), stripe_pages >= 1,
  // 1 <= replicas <= min(kMaxReplicas, servers.size()).
  PagePlacement(Placement kind, uint64_t file_id, uint32_t stripe_pages,
                const std::vector<std::string>& servers, uint32_t replicas = 1);

  // The index (into the server list) of the server holding `page`'s first
  // copy.
  size_t server_for(int64_t page) const;
  // The servers of every copy of `page`.
  ReplicaSet replicas_for(int64_t page) const;
  size_t server_count() const { return seeds_.size(); }
  uint32_t replicas() const { return replicas_; }

 private:
  // The server of stripe unit `unit`.
  size_t server_of_unit(uint64_t unit) const;

  Placement kind_;
  uint64_t file_id_;
  uint32_t stripe_pages_;
  uint32_t replicas_;
  std::vector<uint64_t> seeds_;  // one per server: the hash of its address
  // The server of unit 0, worked out once: a file placed whole on one
  // server (a huge stripe unit) asks for no other.
  size_t unit0_server_ = 0;
};

}  // namespace pagefile::net
