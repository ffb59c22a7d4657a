#include "tests/support/temp_dir.h"

#include <linux/magic.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <system_error>

namespace pagefile::test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/pagefile-test-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + templ);
  }
  path_ = templ;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

bool scratch_in_memory() {
  constexpr const char* kShm = "/dev/shm";
  struct statfs fs {};
  if (::statfs(kShm, &fs) != 0 || fs.f_type != TMPFS_MAGIC || ::access(kShm, W_OK) != 0) return false;
  return ::setenv("TMPDIR", kShm, 1) == 0;
}

std::vector<std::byte> page_pattern(uint32_t page_size, int64_t page, uint64_t seed) {
  std::vector<std::byte> out(page_size);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(page) + 1;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x & 0xff);
  }
  return out;
}

}  // namespace pagefile::test
