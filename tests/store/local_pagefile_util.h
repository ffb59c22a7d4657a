// Helpers of the LocalPagefile tests (local_pagefile*_test.cpp): files made
// as the client and the VFS make them, and bytes read or written behind the
// store's back.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <vector>

#include <doctest/doctest.h>

#include "store/local_pagefile.h"
#include "tests/support/temp_dir.h"

namespace pagefile::test {

inline LocalPagefile::OpenSpec create_spec(uint32_t page_size) {
  LocalPagefile::OpenSpec spec;
  spec.page_size = page_size;
  spec.create = true;
  return spec;
}

// A new file as the VFS makes a WAL: 16 KiB pages, a checksum per sector.
inline constexpr uint32_t kWalPage = 16384;
inline LocalPagefile::OpenSpec wal_spec() {
  LocalPagefile::OpenSpec spec = create_spec(kWalPage);
  spec.sector_checksums = true;
  return spec;
}

inline std::unique_ptr<LocalPagefile> must_open(const std::filesystem::path& path,
                                         const LocalPagefile::OpenSpec& spec) {
  auto f = LocalPagefile::open(path, spec);
  INFO(f.status().to_string());
  REQUIRE(f.is_ok());
  return std::move(*f);
}

// A new file of `page_size`-byte pages (create_spec) in a directory of its
// own: auto& [dir, path, f] = new_file.
struct NewFile {
  explicit NewFile(uint32_t page_size) : f(must_open(path, create_spec(page_size))) {}
  TempDir dir;
  std::filesystem::path path = dir / "f";
  std::unique_ptr<LocalPagefile> f;
};

// A file made as a WAL (wal_spec) and another descriptor of it.
struct WalFile {
  TempDir dir;
  std::filesystem::path path = dir / "wal";
  std::unique_ptr<LocalPagefile> file = must_open(path, wal_spec());
  std::unique_ptr<LocalPagefile> other = must_open(path, LocalPagefile::OpenSpec{});
};

// The bytes of `len` at `offset` of the file, read or written behind the
// store's back.
inline std::vector<std::byte> raw_read(const std::filesystem::path& path, off_t offset, size_t len) {
  std::vector<std::byte> out(len);
  int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, out.data(), len, offset) == static_cast<ssize_t>(len));
  ::close(fd);
  return out;
}

inline void raw_write(const std::filesystem::path& path, off_t offset, const std::vector<std::byte>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), offset) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

}  // namespace pagefile::test
