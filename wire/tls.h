// TLS for links over a network: the tls://HOST:PORT transport, TLS 1.3 over
// OpenSSL through Asio, and the two ways a peer proves who it is.
//
//   Certificates (mutual TLS): each side has a certificate and its key
//   (`cert`, `key`) and trusts the peers whose certificates chain to `ca`.
//   A client also checks that the server's certificate names the host it
//   dialled (a DNS or IP subject alternative name).
//
//   A pre-shared key (TLS 1.3 external PSK, as nbdkit's --tls-psk): a key
//   file made by `pagefile keygen`, one line per key,
//       IDENTITY:ROLE:HEX
//   (an identity the server looks the key up by, the role it grants, and 32
//   random bytes in hex). A client presents the first key of its file; a
//   server accepts every key of every file it is given. A key file anyone
//   but its owner may read is refused, as ssh refuses such a private key.
//
// A server learns its peer's role from the handshake (PeerRole): from the
// key, or from its certificate's common name through `subject_roles`. A
// peer that presents neither a valid certificate nor a known key is
// refused before any frame is read, and the refusal is logged.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pagefile/status.h"

namespace pagefile::net {

// What a peer may do on a server (server/access.h has the rules). Peers
// reached without TLS (tcp:// on loopback, unix: sockets guarded by their
// mode, inproc:) are trusted as admins, as before there were roles.
enum class PeerRole : uint8_t {
  kReader = 1,  // open, read, status, shared locks
  kWriter = 2,  // and write, truncate, sync, every lock, create
  kAdmin = 3,   // and unlink, import, scrub, resync, server administration
};
std::string_view role_name(PeerRole role);
// "reader", "writer" or "admin"; kInvalidArgument otherwise.
Result<PeerRole> parse_role(std::string_view text);

// How one side of tls:// links proves itself and whom it trusts. Paths of
// PEM files; empty: not used.
struct TlsOptions {
  std::string cert;  // this side's certificate (chain)
  std::string key;   // its private key
  std::string ca;    // the certificates a peer's must chain to
  // Key files (pagefile keygen). A client uses the first key of the first
  // file; a server accepts all.
  std::vector<std::string> psk_files;
  // A server's map from a client certificate's common name to its role.
  // Empty: every certificate that chains to `ca` is an admin's. Otherwise a
  // certificate whose name is not here is refused.
  std::map<std::string, PeerRole> subject_roles;

  bool empty() const { return cert.empty() && key.empty() && ca.empty() && psk_files.empty(); }
};

struct PresharedKey {
  std::string identity;
  PeerRole role = PeerRole::kAdmin;
  std::vector<uint8_t> secret;
};

// The keys of a key file. kPermissionDenied when group or others may read
// it; kInvalidArgument, naming the file and line, for a malformed one.
Result<std::vector<PresharedKey>> read_psk_file(const std::string& path);

// Makes a new key file at `path` with one fresh key for `role`, mode 0600.
// kAlreadyExists when the path exists (a key is never overwritten).
Result<PresharedKey> write_new_psk_file(const std::string& path, PeerRole role);

// The loaded certificates and keys of one side, shared by its connections.
class TlsContext;
enum class TlsSide : uint8_t { kClient, kServer };

// Loads `options` for `side`. kInvalidArgument naming the file and what is
// wrong with it (missing, unreadable, not PEM, a key that does not match the
// certificate), or when `options` give this side no way to prove itself or
// trust its peer; kPermissionDenied for a key file others may read.
Result<std::shared_ptr<TlsContext>> make_tls_context(const TlsOptions& options, TlsSide side);

}  // namespace pagefile::net
