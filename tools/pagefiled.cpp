// pagefiled: the page server.
//
//   pagefiled --listen ADDR --dir DIR [--threads N] [--cache-pages N] [--prefetch-pages K]
//             [--disk-latency MS] [--sync fdatasync|dsync|none] [--lease-ms N] [--poll-us N]
//             [--max-connections N] [--max-frame-bytes B] [--max-inflight N] [--idle-timeout-s S]
//             [--slow-ms MS] [--catalog etcd://H:P,H:P,H:P]
//             [--insecure] [--socket-mode MODE] [--config FILE]
//             [--psk-file FILE]... [--tls-cert PEM --tls-key PEM [--tls-ca PEM] [--cert-role CN=NAME=ROLE]...]
//
// Safe by default: without TLS it listens only on loopback addresses and
// unix: sockets (mode 0600 unless --socket-mode says otherwise), since
// anyone who reaches it can read, overwrite and delete every file.
// --insecure serves another address in the clear all the same, and says so
// at start. On tls://HOST:PORT every peer proves itself with a key file
// (pagefile keygen) or a certificate signed by --tls-ca, and is served in
// the role the key or --cert-role gives it (wire/tls.h, server/access.h). --config FILE reads any of
// these flags from a TOML file (tools/common/config_file.h); the command
// line overrides it.
//
// With --catalog etcd://..., the catalog is on that etcd cluster
// (server/etcd_catalog.h): this server answers catalog requests from it as
// every other such server does, and registers itself there as live, under a
// lease it renews, so clients see it gone within one lease of its death.
// Prints "pagefiled: listening on ADDR" once it accepts connections (with
// the real port when ADDR asked for port 0). SIGTERM or SIGINT stops it
// cleanly: requests already received are answered, page work in flight
// finishes, and a restart over the same DIR finds every synced page.
#include <signal.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bus/bus_config.h"
#include "core/log.h"
#include "server/etcd_catalog.h"
#include "server/page_server.h"
#include "tools/common/config_file.h"
#include "tools/common/flag_checks.h"
#include "tools/common/metrics_http.h"

namespace {

// The largest --cache-pages: 2^40 pages (4 PiB of 4 KiB pages) is more than
// any machine holds, and far enough below 2^64 that "-1", which CLI11 wraps
// to 2^64-1, is refused instead of taken as a pool with no bound.
constexpr uint64_t kMaxCachePages = uint64_t{1} << 40;

// A path for the log: "none" when empty.
std::string_view or_none(const std::string& path) { return path.empty() ? std::string_view("none") : path; }

}  // namespace

int main(int argc, char** argv) {
  using namespace pagefile;
  CLI::App app{"pagefiled: serves pages of remote Pagefiles (and the catalog) on the bus"};
  // The last value wins: a flag on the command line over the config file's.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string listen_text;
  std::string dir;
  net::ServerOptions options;
  double disk_latency_ms = 0;
  std::string sync = "fdatasync";
  int64_t lease_ms = options.lease.count();
  app.add_option("--listen", listen_text, "tls://HOST:PORT, tcp://HOST:PORT or unix:/PATH")->required();
  app.add_option("--dir", dir, "directory for this server's pages and catalog")->required();
  app.add_option("--threads", options.threads, "page-work threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--cache-pages", options.cache_pages,
                 "pages the server's buffer pool holds, shared by the files under their policies")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, kMaxCachePages));
  app.add_option("--prefetch-pages", options.prefetch_pages,
                 "global-sequential files: a miss beyond the window reads ahead to it plus this many pages")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  app.add_option("--disk-latency", disk_latency_ms,
                 "emulate one disk: every uncached page access waits this many ms, one at a time")
      ->capture_default_str()
      ->check(tools::kFinite)
      ->check(CLI::Range(0.0, 10000.0));
  app.add_option("--sync", sync, "how sync makes writes durable")
      ->capture_default_str()
      ->check(CLI::IsMember({"fdatasync", "dsync", "none"}));
  int64_t poll_us = options.poll_before_sleep.count();
  app.add_option("--poll-us", poll_us,
                 "after its last event the network thread polls this long before it sleeps (0: at once)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  app.add_option("--max-connections", options.max_connections,
                 "connections served at once; one more is refused with a message")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-frame-bytes", options.max_frame_bytes,
                 "largest request a connection may send; a larger one is refused (the connection kept)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4096}, size_t{net::kMaxFrameBytes}));
  app.add_option("--max-inflight", options.max_inflight,
                 "requests in flight per connection; one more is refused with an I/O error (the connection kept)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000000u));
  int64_t idle_timeout_s = 0;
  app.add_option("--idle-timeout-s", idle_timeout_s,
                 "close a connection that sent nothing and has nothing in flight for this long (0: never)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{86400 * 365}));
  bool no_checksums = false;
  app.add_flag("--no-checksums", no_checksums,
               "neither check nor store page checksums: only to measure what they cost (pages written so "
               "fail their check when read by a server that checks)");
  app.add_option("--lease-ms", lease_ms, "lock lease of the catalog")->capture_default_str()->check(CLI::Range(50, 3600000));
  std::string catalog;
  app.add_option("--catalog", catalog,
                 "etcd://HOST:PORT[,HOST:PORT...]: keep the catalog on this etcd cluster (default: the built-in one "
                 "in DIR)");
  net::TlsOptions tls;
  app.add_option("--psk-file", tls.psk_files, "tls://: a key file of clients' keys (pagefile keygen; repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--tls-cert", tls.cert, "tls://: this server's certificate (PEM)");
  app.add_option("--tls-key", tls.key, "tls://: its private key (PEM)");
  app.add_option("--tls-ca", tls.ca, "tls://: the CA certificates clients' certificates must chain to (PEM)");
  std::vector<std::string> cert_roles;
  app.add_option("--cert-role", cert_roles,
                 "tls://: CN=NAME=ROLE, the role of a client certificate by its common name (repeatable; none: every "
                 "certificate --tls-ca signed is an admin's)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  bool insecure = false;
  app.add_flag("--insecure", insecure,
               "listen on an address other than loopback without TLS (anyone who reaches it can read, "
               "overwrite and delete every file)");
  std::string socket_mode = "0600";
  app.add_option("--socket-mode", socket_mode, "mode of a unix: socket (octal)")
      ->capture_default_str()
      ->check([](const std::string& text) {
        return text.size() >= 3 && text.size() <= 4 && text.find_first_not_of("01234567") == std::string::npos
                   ? std::string()
                   : std::string("an octal mode such as 0600 or 0660");
      });
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical or off (to stderr)")
      ->capture_default_str();
  int64_t slow_ms = 0;
  app.add_option("--slow-ms", slow_ms, "log requests that take longer than this from arrival to answer (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}));
  std::string metrics;
  app.add_option("--metrics", metrics,
                 "HOST:PORT to serve GET /metrics on (Prometheus text format; loopback unless --insecure)");
  app.add_option("--config", "a TOML file of these flags, keys named as the flags without dashes");
  std::string config_file;
  if (int exit = tools::parse_with_config(app, argc, argv, &config_file); exit >= 0) return exit;

  if (Status s = log_to_stderr(log_level); !s) {
    fmt::print(stderr, "pagefiled: --log-level: {}\n", s.to_string());
    return 2;
  }
  options.slow_request = std::chrono::milliseconds(slow_ms);
  options.idle_timeout = std::chrono::seconds(idle_timeout_s);
  auto address = net::parse_address(listen_text);
  if (!address) {
    fmt::print(stderr, "pagefiled: {}\n", address.status().to_string());
    return 2;
  }
  if (address->kind == net::Address::Kind::kInproc) {
    fmt::print(stderr, "pagefiled: inproc: addresses live inside a client; listen on tls://, tcp:// or unix:\n");
    return 2;
  }
  const bool loopback = address->kind != net::Address::Kind::kTcp || net::is_loopback_host(address->host);
  if (!loopback && !insecure) {
    fmt::print(stderr,
               "pagefiled: refusing to listen on {} without TLS: it is not a loopback address, so anyone who "
               "reaches it could read, overwrite and delete every file. Listen on tls://{}:{} with --psk-file "
               "or --tls-cert/--tls-key, or on loopback, or pass --insecure on a network you trust\n",
               address->text(), address->host, address->port);
    return 2;
  }
  for (const std::string& entry : cert_roles) {
    size_t eq = entry.rfind('=');
    auto role = net::parse_role(eq == std::string::npos ? std::string() : entry.substr(eq + 1));
    if (eq == std::string::npos || eq < 4 || entry.rfind("CN=", 0) != 0 || !role) {
      fmt::print(stderr, "pagefiled: --cert-role '{}': expected CN=NAME=ROLE, ROLE reader, writer or admin\n", entry);
      return 2;
    }
    tls.subject_roles[entry.substr(3, eq - 3)] = *role;
  }
  if (address->kind == net::Address::Kind::kTls) {
    auto context = net::make_tls_context(tls, net::TlsSide::kServer);
    if (!context) {
      fmt::print(stderr, "pagefiled: {}\n", context.status().to_string());
      return 2;
    }
    options.tls = std::move(*context);
  } else if (!tls.empty()) {
    fmt::print(stderr, "pagefiled: --psk-file and --tls-* are for a tls:// address; {} is not one\n", address->text());
    return 2;
  }
  options.unix_socket_mode = static_cast<uint32_t>(std::stoul(socket_mode, nullptr, 8));
  std::string metrics_host = metrics.substr(0, metrics.rfind(':'));
  if (metrics_host.size() > 2 && metrics_host.front() == '[') metrics_host = metrics_host.substr(1, metrics_host.size() - 2);
  const bool metrics_loopback = metrics.empty() || net::is_loopback_host(metrics_host);
  if (!metrics_loopback && !insecure) {
    fmt::print(stderr, "pagefiled: refusing to serve metrics on {}: not a loopback address (pass --insecure to "
                       "serve them beyond this machine)\n", metrics);
    return 2;
  }
  options.dir = dir;
  options.checksums = !no_checksums;
  options.poll_before_sleep = std::chrono::microseconds(poll_us);
  options.disk_latency = std::chrono::microseconds(static_cast<int64_t>(disk_latency_ms * 1000));
  options.sync = sync == "dsync" ? net::SyncMode::kDsync
                 : sync == "none" ? net::SyncMode::kNone
                                  : net::SyncMode::kFdatasync;
  options.lease = std::chrono::milliseconds(lease_ms);
  if (!catalog.empty()) {
    auto members = net::parse_etcd_members(catalog);
    if (!members) {
      fmt::print(stderr, "pagefiled: --catalog: {}\n", members.status().to_string());
      return 2;
    }
    options.etcd = *members;
  }

  // Block the stop signals before any thread starts, so only sigwait sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);  // a reload, not a stop
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = net::PageServer::start(options, *address);
  if (!server) {
    fmt::print(stderr, "pagefiled: {}\n", server.status().to_string());
    return 1;
  }
  std::unique_ptr<tools::MetricsHttp> metrics_http;
  if (!metrics.empty()) {
    auto started = tools::MetricsHttp::start(metrics, [s = server->get()] { return s->metrics_text(); });
    if (!started) {
      fmt::print(stderr, "pagefiled: --metrics: {}\n", started.status().to_string());
      return 1;
    }
    metrics_http = std::move(*started);
    fmt::print("pagefiled: metrics on {}\n", metrics_http->url());
  }
  if (!loopback) {
    fmt::print(stderr, "pagefiled: WARNING: serving {} in the clear to whoever reaches it (--insecure): no "
                       "encryption, no authentication\n", (*server)->address().text());
  }
  logger().info("start listen={} dir={} threads={} cache_pages={} prefetch_pages={} disk_latency_ms={} sync={} "
                "lease_ms={} max_connections={} max_frame_bytes={} max_inflight={} idle_timeout_s={} checksums={} "
                "catalog={} metrics={} slow_ms={} insecure={} psk_files={} tls_cert={} tls_ca={} cert_roles={}",
                (*server)->address().text(), dir, options.threads, options.cache_pages, options.prefetch_pages,
                disk_latency_ms, sync, lease_ms, options.max_connections, options.max_frame_bytes,
                options.max_inflight, idle_timeout_s, options.checksums ? "on" : "off",
                catalog.empty() ? "built-in" : catalog, metrics_http ? metrics_http->url() : "off", slow_ms,
                insecure, tls.psk_files.size(), or_none(tls.cert), or_none(tls.ca), cert_roles.size());
  fmt::print("pagefiled: listening on {}{}\n", (*server)->address().text(),
             disk_latency_ms > 0 ? fmt::format(" (emulated disk latency {} ms)", disk_latency_ms) : "");
  std::fflush(stdout);

  // Registration at a catalog on etcd, renewed every third of a lease; a
  // failure is said once, and the next success too.
  std::mutex registry_mu;
  std::condition_variable registry_cv;
  bool stopping = false;
  std::thread registry;
  if (!options.etcd.empty()) {
    registry = std::thread([&, address = (*server)->address().text()] {
      net::EtcdCatalog::Options etcd;
      etcd.endpoints = options.etcd;
      etcd.lease = options.lease;
      std::unique_ptr<net::EtcdCatalog> front;
      bool failing = false;
      std::unique_lock lock(registry_mu);
      while (!stopping) {
        lock.unlock();
        Status s;
        if (!front) {
          auto opened = net::EtcdCatalog::open(etcd);
          if (opened) front = std::move(*opened);
          s = opened.status();
        }
        if (front) s = front->register_server(address);
        if (!s && !failing) fmt::print(stderr, "pagefiled: registering at the catalog on etcd: {}\n", s.to_string());
        if (s && failing) fmt::print(stderr, "pagefiled: registered at the catalog on etcd again\n");
        failing = !s;
        lock.lock();
        registry_cv.wait_for(lock, std::max(std::chrono::milliseconds(200), std::chrono::milliseconds(
                                                                                 std::max<int64_t>(2000, lease_ms) / 3)));
      }
      lock.unlock();
      if (front) (void)front->deregister_server(address);
    });
  }

  int signal_number = 0;
  for (;;) {
    sigwait(&stop_signals, &signal_number);
    if (signal_number != SIGHUP) break;
    // SIGHUP: what can change live is the credentials (read again from the
    // same files: a rotated certificate, keys added or withdrawn; for the
    // connections to come) and the log level (from --config); the rest
    // needs a restart. Said either way.
    if (options.tls) {
      auto reloaded = net::make_tls_context(tls, net::TlsSide::kServer);
      Status s = reloaded ? (*server)->set_tls(*reloaded) : reloaded.status();
      if (s) {
        logger().info("reload tls psk_files={} tls_cert={} tls_ca={} (for new connections)", tls.psk_files.size(),
                      or_none(tls.cert), or_none(tls.ca));
      } else {
        logger().error("reload refused what=tls why=\"{}\" (the credentials loaded before stay)", s.to_string());
      }
    }
    if (config_file.empty()) {
      if (!options.tls) logger().warn("reload refused why=\"no --config file to reload from\"");
      continue;
    }
    auto read = tools::read_config(app, config_file);
    if (!read) {
      logger().error("reload refused config={} why=\"{}\"", config_file, read.status().to_string());
      continue;
    }
    std::string level = log_level;  // as the command line (or the file at start) left it
    for (size_t i = 0; i + 1 < read->args.size(); ++i) {
      if (read->args[i] == "--log-level") level = read->args[i + 1];
    }
    const bool said = logger().should_log(spdlog::level::info);
    if (said) {
      logger().info("reload config={} log_level={} (other settings take effect at a restart)", config_file, level);
    }
    if (Status s = set_log_level(level); !s) {
      logger().error("reload refused config={} why=\"{}\"", config_file, s.to_string());
      continue;
    }
    // (Said at info under whichever of the two levels lets it through.)
    if (!said) {
      logger().info("reload config={} log_level={} (other settings take effect at a restart)", config_file, level);
    }
  }
  if (registry.joinable()) {
    {
      std::lock_guard lock(registry_mu);
      stopping = true;
    }
    registry_cv.notify_all();
    registry.join();
  }
  fmt::print("pagefiled: {} received, stopping\n", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  if (metrics_http) metrics_http->stop();
  (*server)->stop();
  auto c = (*server)->counters();
  fmt::print("pagefiled: stopped after {} requests ({} pages read, {} written, {} syncs)\n", c.requests,
             c.pages_read, c.pages_written, c.syncs);
  logger().info("stop signal={} requests={} pages_read={} pages_written={} syncs={} errors={}",
                signal_number == SIGTERM ? "SIGTERM" : "SIGINT", c.requests, c.pages_read, c.pages_written, c.syncs,
                c.errors);
  return 0;
}
