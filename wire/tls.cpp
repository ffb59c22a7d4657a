// Loading certificates and pre-shared keys, key files, and a server's
// verdict on who its peer is (wire/tls.h).
#include "wire/tls.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <boost/asio/ssl/error.hpp>
#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "core/enum_names.h"
#include "core/os_error.h"
#include "wire/tls_context.h"
#include "wire/transport_internal.h"

namespace pagefile::net {

namespace {

namespace ssl = boost::asio::ssl;

constexpr size_t kSecretBytes = 32;

constexpr EnumName<PeerRole> kRoleNames[] = {
    {PeerRole::kReader, "reader"}, {PeerRole::kWriter, "writer"}, {PeerRole::kAdmin, "admin"}};

// Per-connection data a TLS handshake leaves for the server: the role of
// the key the PSK callback accepted.
int role_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
// Set when the peer offered a key identity the server does not hold.
int unknown_key_index() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}
// The TlsContext an SSL_CTX was loaded by, for the PSK callbacks.
int context_index() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

bool parse_hex(std::string_view text, std::vector<uint8_t>& out) {
  if (text.size() % 2 != 0) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out.clear();
  for (size_t i = 0; i < text.size(); i += 2) {
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return true;
}

// A PEM file a TLS option names: kInvalidArgument naming the option when it
// cannot be read (OpenSSL's own message would say only "system lib").
Status check_readable(std::string_view option, const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::invalid_argument(fmt::format("{} {}", option, path), std::strerror(errno));
  return Status::ok();
}

}  // namespace

std::string openssl_reason() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown reason";
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : fmt::format("error {:#x}", code);
}

std::string_view role_name(PeerRole role) { return name_of(kRoleNames, role, "?"); }

Result<PeerRole> parse_role(std::string_view text) {
  if (std::optional<PeerRole> role = value_named(kRoleNames, text)) return *role;
  return Status::invalid_argument(fmt::format("role '{}'", text), "expected reader, writer or admin");
}

Result<std::vector<PresharedKey>> read_psk_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_status(errno, path, "key file");
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return Status::permission_denied(
        path, fmt::format("key file may be read by others (mode {:04o}); make it the owner's only: chmod 600 {}",
                          st.st_mode & 07777, path));
  }
  std::ifstream in(path);
  if (!in) return errno_status(errno, path, "open key file");
  std::vector<PresharedKey> keys;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](std::string_view what) {
      return Status::invalid_argument(fmt::format("{}:{}", path, number),
                                      fmt::format("{} (a key line is IDENTITY:ROLE:HEX, made by pagefile keygen)", what));
    };
    size_t first = line.find(':');
    size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) return bad("not a key line");
    PresharedKey key;
    key.identity = line.substr(0, first);
    if (key.identity.empty() || key.identity.size() > 128) return bad("identity empty or longer than 128 bytes");
    Result<PeerRole> role = parse_role(line.substr(first + 1, second - first - 1));
    if (!role) return bad(role.status().message());
    key.role = *role;
    if (!parse_hex(std::string_view(line).substr(second + 1), key.secret) || key.secret.size() < 16 ||
        key.secret.size() > 64) {
      return bad("the key is not 16 to 64 bytes in hex");
    }
    keys.push_back(std::move(key));
  }
  if (keys.empty()) return Status::invalid_argument(path, "key file holds no key (make one with pagefile keygen)");
  return keys;
}

Result<PresharedKey> write_new_psk_file(const std::string& path, PeerRole role) {
  PresharedKey key;
  key.role = role;
  key.secret.resize(kSecretBytes);
  std::vector<uint8_t> id(8);
  if (RAND_bytes(key.secret.data(), static_cast<int>(key.secret.size())) != 1 ||
      RAND_bytes(id.data(), static_cast<int>(id.size())) != 1) {
    return Status::io_error(path, fmt::format("no random bytes: {}", openssl_reason()));
  }
  key.identity = "pagefile-" + hex(id);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return Status::already_exists(path, "a key file is never overwritten; remove it first");
    return errno_status(errno, path, "create key file");
  }
  // The umask cannot widen 0600, but it may have narrowed it below what the
  // owner needs to read it back.
  const std::string text = fmt::format("# a Pagefile key (pagefile keygen): IDENTITY:ROLE:HEX\n{}:{}:{}\n",
                                       key.identity, role_name(role), hex(key.secret));
  Status status;
  if (::fchmod(fd, 0600) != 0 ||
      ::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) || ::fsync(fd) != 0) {
    status = errno_status(errno, path, "write key file");
  }
  ::close(fd);
  if (!status) {
    ::unlink(path.c_str());
    return status;
  }
  return key;
}

TlsContext::TlsContext(TlsSide side) : side_(side), ssl_(ssl::context::tls) {}

Status TlsContext::load(const TlsOptions& options) {
  SSL_CTX* ctx = ssl_.native_handle();
  SSL_CTX_set_ex_data(ctx, context_index(), this);
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) {
    return Status::not_supported("TLS", fmt::format("TLS 1.3 unavailable: {}", openssl_reason()));
  }
  boost::system::error_code ec;
  if (options.cert.empty() != options.key.empty()) {
    return Status::invalid_argument("TLS", "--tls-cert and --tls-key go together (a certificate and its private key)");
  }
  if (!options.cert.empty()) {
    if (Status s = check_readable("--tls-cert", options.cert); !s) return s;
    if (Status s = check_readable("--tls-key", options.key); !s) return s;
    if (ssl_.use_certificate_chain_file(options.cert, ec); ec) {
      return Status::invalid_argument("--tls-cert " + options.cert, fmt::format("not a PEM certificate: {}", ec.message()));
    }
    if (ssl_.use_private_key_file(options.key, ssl::context::pem, ec); ec) {
      return Status::invalid_argument("--tls-key " + options.key, fmt::format("not a PEM private key that matches "
                                                                                "the certificate {}: {}",
                                                                                options.cert, ec.message()));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return Status::invalid_argument("--tls-key " + options.key,
                                      fmt::format("does not match the certificate {}", options.cert));
    }
  }
  if (!options.ca.empty()) {
    if (Status s = check_readable("--tls-ca", options.ca); !s) return s;
    if (ssl_.load_verify_file(options.ca, ec); ec) {
      return Status::invalid_argument("--tls-ca " + options.ca, fmt::format("not PEM certificates: {}", ec.message()));
    }
  }
  std::vector<PresharedKey> keys;
  for (const std::string& file : options.psk_files) {
    Result<std::vector<PresharedKey>> read = read_psk_file(file);
    if (!read) return read.status();
    keys.insert(keys.end(), read->begin(), read->end());
  }

  if (side_ == TlsSide::kServer) {
    if (options.cert.empty() && keys.empty()) {
      return Status::invalid_argument("TLS", "a tls:// server needs --tls-cert and --tls-key, or --psk-file");
    }
    if (!options.cert.empty() && options.ca.empty() && keys.empty()) {
      // It would show its certificate and then refuse every client: none
      // could prove itself.
      return Status::invalid_argument("--tls-cert " + options.cert,
                                      "a tls:// server must be able to check its clients: give --tls-ca (the CA "
                                      "of their certificates) or --psk-file (their keys)");
    }
    if (!options.ca.empty() && options.cert.empty()) {
      return Status::invalid_argument("--tls-ca " + options.ca,
                                      "a server that checks client certificates needs its own (--tls-cert, --tls-key)");
    }
    // Client certificates are asked for only when there is a CA to check
    // them against; a PSK handshake never asks for one.
    ssl_.set_verify_mode(options.ca.empty() ? ssl::verify_none : ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    for (PresharedKey& key : keys) keys_[key.identity] = std::move(key);
    if (!keys_.empty()) SSL_CTX_set_psk_server_callback(ctx, &TlsContext::server_psk);
    subject_roles_ = options.subject_roles;
  } else {
    if (options.ca.empty() && keys.empty()) {
      return Status::invalid_argument("TLS", "a tls:// client needs --tls-ca (to trust the servers) or --psk-file");
    }
    // Always verified: a client with only a key has no CA, so a server that
    // answers with a certificate instead of the key fails here.
    ssl_.set_verify_mode(ssl::verify_peer);
    if (!keys.empty()) {
      own_key_ = std::move(keys.front());
      SSL_CTX_set_psk_client_callback(ctx, &TlsContext::client_psk);
    }
  }
  return Status::ok();
}

const TlsContext* TlsContext::of(SSL* ssl) {
  return static_cast<const TlsContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), context_index()));
}

unsigned int TlsContext::server_psk(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_psk_len) {
  const TlsContext* self = of(ssl);
  if (self == nullptr || identity == nullptr) return 0;
  auto it = self->keys_.find(identity);
  if (it == self->keys_.end() || it->second.secret.size() > max_psk_len) {
    // Unknown: no PSK, and the handshake fails for want of anything else;
    // noted so the refusal says why rather than OpenSSL's consequence.
    SSL_set_ex_data(ssl, unknown_key_index(), const_cast<char*>("unknown"));
    return 0;
  }
  std::memcpy(psk, it->second.secret.data(), it->second.secret.size());
  SSL_set_ex_data(ssl, role_index(), reinterpret_cast<void*>(static_cast<intptr_t>(it->second.role)));
  return static_cast<unsigned int>(it->second.secret.size());
}

unsigned int TlsContext::client_psk(SSL* ssl, const char*, char* identity, unsigned int max_identity_len,
                                    unsigned char* psk, unsigned int max_psk_len) {
  const TlsContext* self = of(ssl);
  if (self == nullptr || !self->own_key_) return 0;
  const PresharedKey& key = *self->own_key_;
  if (key.identity.size() + 1 > max_identity_len || key.secret.size() > max_psk_len) return 0;
  std::memcpy(identity, key.identity.c_str(), key.identity.size() + 1);
  std::memcpy(psk, key.secret.data(), key.secret.size());
  return static_cast<unsigned int>(key.secret.size());
}

Result<PeerRole> TlsContext::peer_role(SSL* ssl) const {
  if (void* role = SSL_get_ex_data(ssl, role_index()); role != nullptr) {
    return static_cast<PeerRole>(reinterpret_cast<intptr_t>(role));
  }
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr) return Status::permission_denied("TLS peer", "presented neither a known key nor a certificate");
  if (long result = SSL_get_verify_result(ssl); result != X509_V_OK) {
    return Status::permission_denied("TLS peer", X509_verify_cert_error_string(result));
  }
  char name[256] = {};
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof(name)) < 0) name[0] = '\0';
  if (subject_roles_.empty()) return PeerRole::kAdmin;
  auto it = subject_roles_.find(name);
  if (it == subject_roles_.end()) {
    return Status::permission_denied(fmt::format("TLS peer CN={}", name), "this certificate has no role on this server");
  }
  return it->second;
}

Result<std::shared_ptr<TlsContext>> make_tls_context(const TlsOptions& options, TlsSide side) {
  auto context = std::make_shared<TlsContext>(side);
  if (Status s = context->load(options); !s) return s;
  return context;
}

namespace internal {

Status handshake_status(const boost::system::error_code& ec, std::string_view peer, SSL* ssl) {
  if (ssl != nullptr && SSL_get_ex_data(ssl, unknown_key_index()) != nullptr) {
    return Status::permission_denied(peer, "TLS handshake refused: the peer's key is not one this server holds");
  }
  if (ec == ssl::error::stream_truncated || is_disconnect(ec)) {
    return Status::disconnected(peer, "TLS handshake: the peer hung up (it may have refused our credentials)");
  }
  if (ec == boost::asio::error::operation_aborted) {
    return Status::disconnected(peer, fmt::format("TLS handshake: not done within {} ms", kTlsHandshakeTimeoutMs));
  }
  std::string reason = ec.message();
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    const char* text = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (text != nullptr) reason = text;
  }
  return Status::permission_denied(peer, fmt::format("TLS handshake refused: {}", reason));
}

}  // namespace internal

}  // namespace pagefile::net
