// The first bytes of an ordinary SQLite database file
// (https://sqlite.org/fileformat.html, "The Database Header"): what tells
// one apart, and the page size it names. For the VFS (a new database's
// page 1), `pagefile import` and the Pagefile header's check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace pagefile {

// A SQLite database file begins with these 16 bytes (the NUL included).
inline constexpr std::string_view kSqliteHeaderMagic{"SQLite format 3\0", 16};

// Whether `bytes` begin with kSqliteHeaderMagic.
inline bool has_sqlite_magic(std::span<const std::byte> bytes) {
  return bytes.size() >= kSqliteHeaderMagic.size() &&
         std::string_view(reinterpret_cast<const char*>(bytes.data()), kSqliteHeaderMagic.size()) ==
             kSqliteHeaderMagic;
}

// The page size a SQLite header names (bytes 16 and 17, big-endian; 1
// stands for 65536), or 0 when `bytes` are not one.
inline uint32_t sqlite_header_page_size(std::span<const std::byte> bytes) {
  if (bytes.size() < 18 || !has_sqlite_magic(bytes)) return 0;
  uint32_t size = (std::to_integer<uint32_t>(bytes[16]) << 8) | std::to_integer<uint32_t>(bytes[17]);
  return size == 1 ? 65536 : size;
}

}  // namespace pagefile
