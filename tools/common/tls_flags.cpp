#include "tools/common/tls_flags.h"

#include <cstdlib>
#include <iterator>

#include <fmt/format.h>

#include "bus/bus_config.h"

namespace pagefile::tools {

void add_tls_flags(CLI::App& app, TlsFlags& flags) {
  app.add_option("--psk-file", flags.psk_file, "tls://: prove this client with the key in FILE (pagefile keygen)");
  app.add_option("--tls-cert", flags.cert, "tls://: this client's certificate (PEM)");
  app.add_option("--tls-key", flags.key, "tls://: its private key (PEM)");
  app.add_option("--tls-ca", flags.ca, "tls://: the CA certificates the servers' must chain to (PEM)");
}

std::string bus_with_tls(const std::string& bus, const TlsFlags& flags) {
  std::string extra;
  const std::string* paths[] = {&flags.psk_file, &flags.cert, &flags.key, &flags.ca};  // kTlsBusOptions' order
  for (size_t i = 0; i < std::size(paths); ++i) {
    if (!paths[i]->empty()) extra += fmt::format(",{}={}", net::kTlsBusOptions[i], *paths[i]);
  }
  if (extra.empty()) return bus;
  std::string base = bus;
  if (base.empty()) {
    const char* env = std::getenv("PAGEFILE_BUS");
    base = env != nullptr && *env != '\0' ? env : std::string(net::kDefaultBus);
  }
  return base + extra;
}

}  // namespace pagefile::tools
