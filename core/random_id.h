// Random identities: of a cluster, a server directory, a client, a
// catalog's run. Internal to the project.
#pragma once

#include <cstdint>
#include <random>

namespace pagefile {

// A random 64-bit id, never 0: wherever ids travel, 0 means "not known".
inline uint64_t random_id() {
  std::random_device random;
  uint64_t id = static_cast<uint64_t>(random()) << 32 | random();
  return id != 0 ? id : 1;
}

}  // namespace pagefile
