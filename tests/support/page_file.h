// Looking at a local Pagefile's bytes behind the store's back: what tests of
// checksums and of the tools need (doc/page_format.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace pagefile::test {

// Every page of the local Pagefile at `path`, in order, read and checked
// through the store: the file's content without its header and checksum
// blocks, which differ between equal files (creation time).
std::string stored_pages(const std::filesystem::path& path);

// Flips every bit of byte `byte` of page `page` in the file itself, as a
// failing disk would; the checksum beside the page stays as it was.
void damage_page(const std::filesystem::path& path, int64_t page, uint32_t byte);

}  // namespace pagefile::test
