// The bus topology: which servers exist, how to reach each, which one is
// the catalog. Configuration, never code: it comes from a string, a file or
// the environment, and changing it needs no rebuild.
//
// The string form: addresses separated by commas (or white space, or new
// lines in a file); `#` starts a comment in a file.
//   tcp://10.0.0.1:7001,tcp://10.0.0.2:7001   two servers, the first the catalog
//   tcp://a:1,catalog=tcp://b:1               b is the catalog (and a server)
//   unix:/run/pf0.sock                        one server on a Unix socket
//   inproc:4                                  4 servers inside this process
//   @/etc/pagefile.bus                        read the list from a file
//   @/etc/pagefile.bus,psk_file=/home/a/key   ...and these entries after it
//   inproc:4,checksums=off                    embedded servers without page
//                                             checksums (to measure their cost)
//   tcp://a:1,tcp://b:1,tcp://c:1,replicas=2  files created without a count of
//                                             their own keep 2 copies of each page
//   tcp://a:1,tcp://b:1,catalog=etcd://e1:2379,catalog=etcd://e2:2379,catalog=etcd://e3:2379
//                                             the catalog is on etcd, named once
//                                             per member (server/etcd_catalog.h):
//                                             this client keeps its records and
//                                             locks there itself
//   tls://a:7001,tls://b:7001,psk_file=/etc/pagefile/key
//                                             servers over TLS, this client
//                                             proving itself with a key
//                                             (wire/tls.h); or tls_cert=,
//                                             tls_key= and tls_ca= for
//                                             certificates
// With nothing configured (no string, no PAGEFILE_BUS) the bus is the
// embedded default: inproc:4, with data under PAGEFILE_HOME.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "wire/address.h"
#include "wire/tls.h"
#include "pagefile/status.h"

namespace pagefile::net {

// The bus options that carry TLS credentials, NAME=PATH each, in this
// order: a key file (TlsOptions::psk_files, repeatable), the client's
// certificate, its key, and the CA certificates (cert, key, ca). The client
// tools' flags --psk-file, --tls-cert, --tls-key and --tls-ca become these.
inline constexpr std::string_view kTlsBusOptions[] = {"psk_file", "tls_cert", "tls_key", "tls_ca"};

inline constexpr std::string_view kDefaultBus = "inproc:4";

struct BusConfig {
  std::vector<Address> servers;
  size_t catalog = 0;  // index into servers
  // Servers this process must run itself (from inproc:N), in `servers` too.
  std::vector<Address> embedded;
  std::filesystem::path home;  // where embedded servers keep their data
  bool checksums = true;        // checksums=off: embedded servers run without them
  uint32_t replicas = 1;        // replicas=R: copies of each page of a new file (OpenOptions::replicas)
  // catalog=etcd://HOST:PORT, once per member: the catalog is on etcd, and
  // `catalog` above means nothing. Empty: the catalog is servers[catalog].
  std::vector<std::string> etcd;
  // psk_file=, tls_cert=, tls_key=, tls_ca=: how this client proves itself
  // to tls:// servers and trusts them.
  TlsOptions tls;

  // The name catalog requests are addressed to: servers[catalog]'s
  // address, or etcd://H:P,H:P,... for a catalog on etcd.
  std::string catalog_name() const;
};

// The members of "etcd://H:P,H:P" (or "etcd://H:P,etcd://H:P"), as
// HOST:PORT each. kInvalidArgument for anything else.
Result<std::vector<std::string>> parse_etcd_members(std::string_view text);

// Parses the string form. kInvalidArgument for an empty list, a bad address,
// two catalogs, the same address twice, more replicas than servers, or a
// tls:// server with no psk_file= or tls_ca= to trust it by; the file's
// error for @path.
Result<BusConfig> parse_bus(std::string_view spec, const std::filesystem::path& home);

// `spec` when it is non-empty, else $PAGEFILE_BUS, else kDefaultBus; home
// from `home` when non-empty, else $PAGEFILE_HOME, else ./pagefile-home.
Result<BusConfig> resolve_bus(std::string_view spec, const std::filesystem::path& home = {});

}  // namespace pagefile::net
