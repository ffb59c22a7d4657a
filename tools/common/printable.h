// Bytes from outside (a trace line, a name stored in a page) as they may be
// shown in a message: printable ASCII as it is, every other byte as \xNN,
// so that a message never carries raw control bytes to a terminal.
#pragma once

#include <string>
#include <string_view>

namespace pagefile::tools {

std::string printable(std::string_view bytes);

}  // namespace pagefile::tools
