// The client tools' TLS flags (pagefile, pf-replay): --psk-file, --tls-cert,
// --tls-key and --tls-ca, named as pagefiled names its own, each the same as
// a bus-specification option (psk_file=, tls_cert=, tls_key=, tls_ca=; see
// bus/bus_config.h), which is how they reach the client.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace pagefile::tools {

struct TlsFlags {
  std::string psk_file;
  std::string cert;
  std::string key;
  std::string ca;
};

// Adds the four flags to `app`, filling `flags`.
void add_tls_flags(CLI::App& app, TlsFlags& flags);

// `bus` (or, when empty, $PAGEFILE_BUS, or the embedded default) with the
// flags that were given appended as bus options. `bus` unchanged when none
// was.
std::string bus_with_tls(const std::string& bus, const TlsFlags& flags);

}  // namespace pagefile::tools
