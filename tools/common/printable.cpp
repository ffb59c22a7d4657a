#include "tools/common/printable.h"

#include <fmt/format.h>

namespace pagefile::tools {

std::string printable(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : bytes) {
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

}  // namespace pagefile::tools
