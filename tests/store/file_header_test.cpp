#include "store/file_header.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

using namespace pagefile;

TEST_CASE("a header round-trips") {
  FileHeader h;
  h.page_size = 8192;
  h.policy = {AccessType::kLooping, 3, 99};
  h.created_unix_ns = 1234567890123;
  auto bytes = encode_header(h);
  auto back = decode_header(bytes, "f");
  REQUIRE(back.is_ok());
  CHECK(back->page_size == 8192);
  CHECK(back->policy == h.policy);
  CHECK(back->created_unix_ns == h.created_unix_ns);
}

TEST_CASE("every byte of a damaged header is caught") {
  FileHeader h;
  auto good = encode_header(h);
  // Flip one bit at a spread of offsets, including the checksum itself.
  for (size_t at : {size_t{0}, size_t{7}, size_t{9}, size_t{13}, size_t{16}, size_t{33},
                    size_t{2000}, kHeaderSize - 9, kHeaderSize - 1}) {
    auto bad = good;
    bad[at] ^= std::byte{0x10};
    auto r = decode_header(bad, "f");
    INFO("offset " << at);
    CHECK(r.status().is(Code::kCorruption));
  }
}

TEST_CASE("a short or foreign header is refused") {
  auto bytes = encode_header(FileHeader{});
  CHECK(decode_header(std::span(bytes).first(100), "f").status().is(Code::kCorruption));
  std::array<std::byte, kHeaderSize> zeros{};
  auto r = decode_header(zeros, "f");
  CHECK(r.status().is(Code::kCorruption));
  CHECK(r.status().message() == "f: not a Pagefile (bad magic in header)");
}

TEST_CASE("format versions: 1 to 5 are read; 6 and 0 are refused naming the version; sector checksums need pages over 4 KiB") {
  for (uint32_t version : {1u, 2u, 3u, 4u, 5u}) {
    FileHeader h;
    h.version = version;
    h.page_size = 8192;
    auto back = decode_header(encode_header(h), "f");
    REQUIRE(back.is_ok());
    CHECK(back->version == version);
  }
  for (uint32_t version : {0u, 6u}) {
    FileHeader h;
    h.version = version;
    auto r = decode_header(encode_header(h), "f");
    CHECK(r.status().is(version == 0 ? Code::kCorruption : Code::kNotSupported));
    CHECK(r.status().message() ==
          fmt::format("f: header format version {} (this build reads 1 to 5{})", version,
                      version == 0 ? "" : "; a newer build made it: open it with that build"));
  }
  for (uint32_t version : {3u, 5u}) {
    FileHeader h;
    h.version = version;
    h.page_size = 4096;
    CHECK(decode_header(encode_header(h), "f").status().is(Code::kCorruption));
  }
  CHECK(FileHeader{}.version == kAdjacentLocksFormatVersion);
}
