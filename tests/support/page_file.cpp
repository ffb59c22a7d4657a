#include "tests/support/page_file.h"

#include <fstream>
#include <vector>

#include <doctest/doctest.h>

#include "store/local_pagefile.h"

namespace pagefile::test {

namespace {

std::unique_ptr<LocalPagefile> open_read_only(const std::filesystem::path& path) {
  LocalPagefile::OpenSpec spec;
  spec.read_only = true;
  auto file = LocalPagefile::open(path, spec);
  INFO(path.string() << ": " << file.status().to_string());
  REQUIRE(file);
  return std::move(*file);
}

}  // namespace

std::string stored_pages(const std::filesystem::path& path) {
  auto file = open_read_only(path);
  auto size = file->size_pages();
  REQUIRE(size);
  std::string out;
  std::vector<std::byte> page(file->page_size());
  for (int64_t p = 0; p < *size; ++p) {
    auto read = file->read_page(p, page);
    INFO(path.string() << " page " << p << ": " << read.status().to_string());
    REQUIRE(read);
    out.append(reinterpret_cast<const char*>(page.data()), page.size());
  }
  return out;
}

void damage_page(const std::filesystem::path& path, int64_t page, uint32_t byte) {
  off_t offset = 0;
  {
    auto file = open_read_only(path);
    REQUIRE(byte < file->page_size());
    offset = file->page_offset(page) + byte;
  }
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  REQUIRE(file);
  file.seekg(offset);
  const char old = static_cast<char>(file.get());
  file.seekp(offset);
  file.put(static_cast<char>(old ^ 0xff));
  REQUIRE(file);
}

}  // namespace pagefile::test
