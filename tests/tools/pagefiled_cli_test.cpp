// pagefiled's command line as an operator meets it: safe by default (no
// listening beyond loopback without --insecure, unix sockets for the owner
// only), and --config FILE (TOML) with every flag, the command line
// overriding it, and a clear error naming file, line and key for anything
// it would not take.
#include <arpa/inet.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "tests/support/eventually.h"
#include "tests/support/server_process.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"

using namespace pagefile::test;

namespace {

// pagefiled with `args` under `timeout SECONDS` (SIGTERM then), so a start
// that should have been refused cannot hang the test.
// (Its output goes to files in `dir`, or in dir/`subdir`, which another
// program run at the same time must not share.)
Outcome pagefiled_for(const TempDir& dir, int seconds, std::vector<std::string> args, const std::string& subdir = "") {
  args.insert(args.begin(), {std::to_string(seconds), pagefiled_path()});
  std::filesystem::path where = subdir.empty() ? dir.path() : dir / subdir;
  std::filesystem::create_directories(where);
  return run_program("/usr/bin/timeout", where, args);
}

// The pool size `pagefile status` reports for the server at `address`.
std::string pool_of(const TempDir& dir, const std::string& address) {
  Outcome status = pagefile_admin(dir.path(), {"status", "--bus", address});
  INFO(status.out, status.err);
  auto at = status.out.find("pool ");
  REQUIRE(at != std::string::npos);
  return status.out.substr(at, status.out.find(" pages", at) - at);
}

}  // namespace

TEST_CASE("non-loopback addresses are refused without --insecure, served with it and a warning") {
  TempDir dir;
  for (std::string listen : {"tcp://0.0.0.0:0", "tcp://[::]:0"}) {
    CAPTURE(listen);
    Outcome refused = pagefiled_for(dir, 10, {"--listen", listen, "--dir", (dir / "d").string()});
    CHECK(refused.exit_status == 2);
    CHECK(refused.err.find("not a loopback address") != std::string::npos);
    CHECK(refused.err.find("--insecure") != std::string::npos);
    CHECK(refused.out.find("listening on") == std::string::npos);
  }
  // With --insecure it starts (and warns), until timeout's SIGTERM stops it.
  Outcome served = pagefiled_for(dir, 2, {"--listen", "tcp://0.0.0.0:0", "--dir", (dir / "d").string(), "--insecure"});
  INFO(served.out, served.err);
  CHECK(served.out.find("listening on tcp://0.0.0.0:") != std::string::npos);
  CHECK(served.err.find("WARNING: serving tcp://0.0.0.0:") != std::string::npos);
  // Loopback needs nothing.
  ServerProcess loopback("tcp://127.0.0.1:0", dir / "l");
  CHECK(loopback.stop() == 0);
}

TEST_CASE("tls://: refused at start without credentials, with a key file others may read, or keys off tls://") {
  TempDir dir;
  const std::string key = (dir / "k").string();
  REQUIRE(pagefile_admin(dir.path(), {"keygen", key}).exit_status == 0);
  auto start = [&](std::vector<std::string> extra, const std::string& subdir) {
    std::vector<std::string> args = {"--listen", "tls://127.0.0.1:0", "--dir", (dir / "d").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return pagefiled_for(dir, 10, args, subdir);
  };
  Outcome none = start({}, "none");
  CHECK(none.exit_status == 2);
  CHECK(none.err.find("needs --tls-cert and --tls-key, or --psk-file") != std::string::npos);

  ::chmod(key.c_str(), 0644);
  Outcome open_key = start({"--psk-file", key}, "open");
  CHECK(open_key.exit_status == 2);
  CHECK(open_key.err.find("may be read by others") != std::string::npos);
  CHECK(open_key.err.find("chmod 600") != std::string::npos);
  ::chmod(key.c_str(), 0600);

  Outcome missing = start({"--tls-cert", (dir / "none.pem").string(), "--tls-key", key}, "missing");
  CHECK(missing.exit_status == 2);
  CHECK(missing.err.find("--tls-cert") != std::string::npos);

  Outcome bad_role = start({"--psk-file", key, "--cert-role", "CN=x=root"}, "role");
  CHECK(bad_role.exit_status == 2);
  CHECK(bad_role.err.find("--cert-role") != std::string::npos);

  Outcome on_tcp = pagefiled_for(dir, 10, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "d").string(),
                                           "--psk-file", key}, "tcp");
  CHECK(on_tcp.exit_status == 2);
  CHECK(on_tcp.err.find("for a tls:// address") != std::string::npos);

  // With a key it serves (until timeout's SIGTERM stops it).
  Outcome served = pagefiled_for(dir, 2, {"--listen", "tls://127.0.0.1:0", "--dir", (dir / "d").string(),
                                          "--psk-file", key}, "served");
  CHECK(served.out.find("listening on tls://127.0.0.1:") != std::string::npos);
}

TEST_CASE("a unix socket is the owner's alone unless --socket-mode says otherwise") {
  TempDir dir;
  const std::string path = (dir / "pf.sock").string();
  {
    ServerProcess server("unix:" + path, dir / "a");
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
  }
  {
    ServerProcess server("unix:" + path, dir / "b", {"--socket-mode", "0660"});
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0660);
  }
  Outcome bad = pagefiled_for(dir, 10, {"--listen", "unix:" + path, "--dir", (dir / "c").string(), "--socket-mode", "rw"});
  CHECK(bad.exit_status != 0);
  CHECK(bad.err.find("octal") != std::string::npos);
}

TEST_CASE("--config: every flag from a TOML file, the command line over it") {
  TempDir dir;
  const auto config = dir / "pagefiled.toml";
  write_file(config, fmt::format("# a server of the test\n"
                                 "dir = \"{}\"\n"
                                 "cache-pages = 77\n"
                                 "threads = 3\n"
                                 "sync = \"fdatasync\"\n",
                                 (dir / "data").string()));
  {
    // (ServerProcess gives --listen and --dir itself: the file's dir is
    // overridden by the command line's, which wins.)
    ServerProcess server("tcp://127.0.0.1:0", dir / "cli-dir", {"--config", config.string()});
    CHECK(pool_of(dir, server.address()) == "pool 0 of 77");
    CHECK(std::filesystem::exists(dir / "cli-dir" / "shares"));
    CHECK_FALSE(std::filesystem::exists(dir / "data"));
  }
  {
    ServerProcess server("tcp://127.0.0.1:0", dir / "cli-dir", {"--config", config.string(), "--cache-pages", "88"});
    CHECK(pool_of(dir, server.address()) == "pool 0 of 88");
  }
}

TEST_CASE("--config: deploy/pagefiled-example.toml is a config pagefiled starts from") {
  TempDir dir;
  const char* example = std::getenv("EXAMPLE_CONFIG");
  REQUIRE(example != nullptr);
  // (Its port and directory are an installation's; the test's override them.)
  Outcome served = pagefiled_for(dir, 2, {"--config", example, "--listen", "tcp://127.0.0.1:0", "--dir",
                                          (dir / "d").string()});
  INFO(served.out, served.err);
  CHECK(served.out.find("listening on tcp://127.0.0.1:") != std::string::npos);
  CHECK(served.err.find("cache_pages=65536") != std::string::npos);
}

TEST_CASE("--config: a typo, a bad value, a table, a syntax error or a missing file stops the start, naming where") {
  TempDir dir;
  struct Case {
    std::string text;
    std::string expected;  // in the error
  };
  const std::vector<Case> cases = {
      {"cache-pages = 10\ncahce-pages = 20\n", "bad.toml:2: cahce-pages: is no setting"},
      {"threads = 0\n", "bad.toml:1: threads: --threads: Value 0 not in range"},
      // (-5 wrapped to 2^64-5 pages, a pool with no bound; a NaN latency
      // was turned into an integer, which is undefined.)
      {"cache-pages = -5\n", "bad.toml:1: cache-pages: --cache-pages: Value -5 not in range"},
      {"disk-latency = nan\n", "bad.toml:1: disk-latency: --disk-latency: Value nan is not a finite number"},
      {"disk-latency = inf\n", "bad.toml:1: disk-latency: --disk-latency: Value inf is not a finite number"},
      {"sync = \"sometimes\"\n", "bad.toml:1: sync:"},
      {"insecure = \"yes\"\n", "bad.toml:1: insecure: is a flag: true or false"},
      {"[server]\nthreads = 2\n", "bad.toml:1: server: is a table"},
      {"threads = [\n", "bad.toml:1:"},
      {"config = \"other.toml\"\n", "bad.toml:1: config: is no setting"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    write_file(dir / "bad.toml", c.text);
    Outcome refused = pagefiled_for(dir, 10, {"--config", (dir / "bad.toml").string(), "--listen", "tcp://127.0.0.1:0",
                                              "--dir", (dir / "d").string()});
    INFO(refused.err);
    CHECK(refused.exit_status == 2);
    CHECK(refused.err.find(c.expected) != std::string::npos);
    CHECK(refused.out.find("listening on") == std::string::npos);
  }
  Outcome missing = pagefiled_for(dir, 10, {"--config", (dir / "none.toml").string(), "--listen", "tcp://127.0.0.1:0",
                                            "--dir", (dir / "d").string()});
  CHECK(missing.exit_status == 2);
  CHECK(missing.err.find("none.toml") != std::string::npos);
}

TEST_CASE("a numeric flag that is negative, NaN or infinite is refused by name, not wrapped or truncated") {
  TempDir dir;
  // Each flag's value the command line cannot mean: CLI11 took "-1" for an
  // unsigned flag as 2^64-1, and let NaN through every range.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--cache-pages", "-1"},       {"--disk-latency", "nan"},  {"--disk-latency", "inf"},
      {"--disk-latency", "-1"},      {"--threads", "-1"},        {"--prefetch-pages", "-1"},
      {"--max-connections", "-1"},   {"--max-frame-bytes", "-1"}, {"--max-inflight", "-1"},
      {"--idle-timeout-s", "-1"},    {"--lease-ms", "-1"},       {"--poll-us", "-1"},
      {"--slow-ms", "-1"},
  };
  for (const auto& [flag, value] : cases) {
    CAPTURE(flag);
    CAPTURE(value);
    Outcome refused = pagefiled_for(dir, 10, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "d").string(), flag,
                                              value});
    INFO(refused.err);
    CHECK(refused.exit_status != 0);
    CHECK(refused.err.find(flag + ": Value " + value) != std::string::npos);
    CHECK(refused.out.find("listening on") == std::string::npos);
  }
}

namespace {

// GET `path` from 127.0.0.1:port: the whole answer (status line, headers,
// body), as curl -i would show it.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  REQUIRE(::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return answer;
}

// The value of the sample line that starts with `series` ("name{labels}").
double sample(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("--metrics: GET /metrics in Prometheus's format, the counters moving with the work") {
  TempDir dir;
  const int port = free_tcp_port();
  ServerProcess server("tcp://127.0.0.1:0", dir / "s", {"--metrics", fmt::format("127.0.0.1:{}", port)});
  const std::string before = http_get(port, "/metrics");
  INFO(before);
  REQUIRE(before.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(before.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(before.find("# TYPE pagefile_pages_written_total counter") != std::string::npos);
  CHECK(sample(before, "pagefile_pages_written_total") == 0);
  CHECK(before.find("# TYPE pagefile_lease_expiries_total counter") != std::string::npos);
  CHECK(sample(before, "pagefile_lease_expiries_total") == 0);

  // Some work: a file of 40 pages written and read back by pf-replay.
  generate_trace(dir.path(), "w.trace", {"--file", "m", "--file-pages", "40", "--pattern", "sequential", "--ops",
                                         "40", "--write-ratio", "1", "--page-size", "4096"});
  Outcome run = pf_replay(dir.path(), {"run", "w.trace", "--bus", server.address(), "--no-progress"});
  INFO(run.out, run.err);
  REQUIRE(run.exit_status == 0);

  const std::string after = http_get(port, "/metrics");
  INFO(after);
  CHECK(sample(after, "pagefile_pages_written_total") >= 40);
  CHECK(sample(after, "pagefile_requests_total{op=\"write\"}") >= 1);
  CHECK(sample(after, "pagefile_request_seconds_count{op=\"write\"}") ==
        sample(after, "pagefile_requests_total{op=\"write\"}"));
  CHECK(sample(after, "pagefile_request_seconds_bucket{op=\"write\",le=\"+Inf\"}") ==
        sample(after, "pagefile_requests_total{op=\"write\"}"));
  CHECK(sample(after, "pagefile_request_bytes_in_total{op=\"write\"}") >= 40 * 4096);
  CHECK(after.find("pagefile_requests_total{op=\"open\"}") != std::string::npos);  // the catalog's too
  // Connections by role: pf-replay's was an admin's (tcp://), and once it
  // has gone (the server sees it close shortly), none is open.
  CHECK(after.find("# TYPE pagefile_connections_by_role gauge") != std::string::npos);
  CHECK(sample(after, "pagefile_connections_by_role{role=\"reader\"}") == 0);
  CHECK(eventually(
      [&] { return sample(http_get(port, "/metrics"), "pagefile_connections_by_role{role=\"admin\"}") == 0; },
      std::chrono::seconds(30), std::chrono::milliseconds(50)));

  // The same counters through `pagefile status --metrics`, under each server.
  Outcome status = pagefile_admin(dir.path(), {"status", "--metrics", "--bus", server.address()});
  INFO(status.out, status.err);
  CHECK(status.exit_status == 0);
  CHECK(status.out.find("  pagefile_requests_total{op=\"write\"} ") != std::string::npos);
  CHECK(status.out.find("  pagefile_request_seconds_bucket{op=\"write\",le=\"+Inf\"} ") != std::string::npos);
  CHECK(http_get(port, "/other").rfind("HTTP/1.1 404", 0) == 0);
  CHECK(server.stop() == 0);

  // Beyond loopback only with --insecure.
  Outcome refused = pagefiled_for(dir, 10, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "t").string(),
                                            "--metrics", "0.0.0.0:0"});
  CHECK(refused.exit_status == 2);
  CHECK(refused.err.find("refusing to serve metrics") != std::string::npos);
}

TEST_CASE("logs: one line per event with key=value fields, on stderr at --log-level") {
  TempDir dir;
  const int port = free_tcp_port();
  const std::string address = fmt::format("tcp://127.0.0.1:{}", port);
  // Stopped with SIGTERM once the work is done (not after a fixed time,
  // which a loaded machine may not finish the work in).
  ServerProcess server(address, dir / "s", {"--disk-latency", "5", "--cache-pages", "0", "--slow-ms", "1"},
                       dir / "server.log");
  // (Reads of pages not in the server's pool wait 5 ms on the emulated
  // disk, past --slow-ms 1.)
  generate_trace(dir.path(), "r.trace", {"--file", "logged", "--file-pages", "8", "--pattern", "random", "--ops",
                                         "32", "--write-ratio", "0.5", "--page-size", "4096"});
  Outcome run = pf_replay(dir.path(), {"run", "r.trace", "--bus", address, "--no-progress"});
  // (The server logs the connection's end when it reads it, maybe after
  // pf-replay has exited.)
  CHECK(wait_for_text(dir / "server.log", " info connection closed peer="));
  CHECK(server.stop() == 0);
  const std::string log = read_file(dir / "server.log");
  INFO(run.err, log);
  REQUIRE(run.exit_status == 0);
  CHECK(log.find(" info start listen=" + address + " dir=") != std::string::npos);
  CHECK(log.find("disk_latency_ms=5") != std::string::npos);
  CHECK(log.find(" info connection open peer=tcp://127.0.0.1:") != std::string::npos);
  CHECK(log.find(" info connection closed peer=tcp://127.0.0.1:") != std::string::npos);
  CHECK(log.find(" warning slow request op=") != std::string::npos);
  CHECK(log.find(" info stop signal=SIGTERM requests=") != std::string::npos);

  // --log-level off: nothing; a level that is none: refused.
  Outcome quiet = pagefiled_for(dir, 1, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "q").string(),
                                         "--log-level", "off"});
  CHECK(quiet.err.empty());
  // Every name --help gives is taken (spdlog spells "warn" "warning").
  for (const char* level : {"warn", "warning", "error", "critical"}) {
    CAPTURE(level);
    Outcome named = pagefiled_for(dir, 1, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "n").string(),
                                           "--log-level", level});
    CHECK(named.err.find("log level") == std::string::npos);
  }
  Outcome bad = pagefiled_for(dir, 10, {"--listen", "tcp://127.0.0.1:0", "--dir", (dir / "b").string(),
                                        "--log-level", "loud"});
  CHECK(bad.exit_status == 2);
  CHECK(bad.err.find("log level 'loud'") != std::string::npos);
}

TEST_CASE("logs: the VFS logs nothing unless PAGEFILE_LOG names a file") {
  // Debian's sqlite3 is not sanitized, and a sanitized pagefile.so cannot
  // be loaded into it (tests/sqlite/README.md says the same of testfixture).
  const char* sanitizers = std::getenv("PAGEFILE_SANITIZERS");
  if (sanitizers != nullptr && std::string(sanitizers) != "none" && *sanitizers != '\0') {
    MESSAGE("skipped in a sanitized build: /usr/bin/sqlite3 cannot load its pagefile.so");
    return;
  }
  TempDir dir;
  const char* so = std::getenv("PAGEFILE_VFS_SO");
  REQUIRE(so != nullptr);
  const std::vector<std::string> args = {"-cmd", fmt::format(".load {}", so), "-cmd", ".vfs pagefile", ":memory:",
                                         "SELECT 1"};
  Outcome silent = run_program("/usr/bin/sqlite3", dir.path(), args);
  CHECK(silent.exit_status == 0);
  CHECK(silent.err.empty());
  Outcome logged = run_program("/usr/bin/sqlite3", dir.path(), args, {{"PAGEFILE_LOG", (dir / "vfs.log").string()}});
  CHECK(logged.exit_status == 0);
  CHECK(logged.err.empty());
  CHECK(read_file(dir / "vfs.log").find(" info vfs registered pid=") != std::string::npos);
  // An error the VFS returns to SQLite is logged with the store's words.
  const std::string missing = (dir / "no-such-dir" / "app.db").string();
  Outcome refused = run_program("/usr/bin/sqlite3", dir.path(),
                                {"-cmd", fmt::format(".load {}", so), "-cmd",
                                 fmt::format(".open file:{}?vfs=pagefile", missing), "CREATE TABLE t(x)"},
                                {{"PAGEFILE_LOG", (dir / "vfs.log").string()}});
  CHECK(refused.err.find("unable to open database") != std::string::npos);
  const std::string log = read_file(dir / "vfs.log");
  CAPTURE(log);
  CHECK(log.find(" warning sqlite code 14: ") != std::string::npos);
  CHECK(log.find(missing) != std::string::npos);
}

TEST_CASE("SIGHUP reloads the log level from --config, and says so") {
  TempDir dir;
  const auto config = dir / "pagefiled.toml";
  const auto log = dir / "stderr.log";
  write_file(config, "log-level = \"info\"\n");
  ServerProcess server("tcp://127.0.0.1:0", dir / "s", {"--config", config.string()}, log);
  auto connect_once = [&] { CHECK(pool_of(dir, server.address()).rfind("pool ", 0) == 0); };
  auto logged = [&](const std::string& text) { return wait_for_text(log, text); };
  connect_once();
  CHECK(logged(" info connection open peer="));

  write_file(config, "log-level = \"warning\"\n");
  REQUIRE(::kill(server.pid(), SIGHUP) == 0);
  CHECK(logged(" info reload config=" + config.string() + " log_level=warning"));
  const size_t before = read_file(log).size();
  connect_once();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(read_file(log).substr(before).find("connection open") == std::string::npos);

  // A file that no longer parses: refused and said; the server goes on.
  write_file(config, "log-level = \"warning\"\ncahce-pages = 3\n");
  REQUIRE(::kill(server.pid(), SIGHUP) == 0);
  CHECK(logged(" error reload refused config="));
  connect_once();
  CHECK(server.stop() == 0);
}

TEST_CASE("SIGHUP reads the key files again: a key added is let in, one withdrawn is refused, a bad file keeps the old") {
  TempDir dir;
  const auto keys = dir / "server.keys";
  const auto log = dir / "stderr.log";
  const std::string first = (dir / "first.key").string(), second = (dir / "second.key").string();
  REQUIRE(pagefile_admin(dir.path(), {"keygen", first}).exit_status == 0);
  REQUIRE(pagefile_admin(dir.path(), {"keygen", second}).exit_status == 0);
  auto serve = [&](const std::vector<std::string>& files) {
    std::string text;
    for (const auto& f : files) text += read_file(f);
    write_file(keys, text);
    ::chmod(keys.c_str(), 0600);
  };
  serve({first});
  ServerProcess server("tls://127.0.0.1:0", dir / "s", {"--psk-file", keys.string()}, log);
  int run = 0;
  auto status_with = [&](const std::string& key) {
    const auto where = dir / ("run-" + std::to_string(++run));
    std::filesystem::create_directories(where);
    return pagefile_admin(where, {"status", "--bus", server.address(), "--psk-file", key});
  };
  auto logged = [&](const std::string& text) { return wait_for_text(log, text); };
  auto up = [](const Outcome& o) { return o.out.find("1 of 1 servers up") != std::string::npos; };
  CHECK(up(status_with(first)));
  CHECK_FALSE(up(status_with(second)));

  serve({second});
  REQUIRE(::kill(server.pid(), SIGHUP) == 0);
  CHECK(logged(" info reload tls psk_files=1"));
  CHECK(up(status_with(second)));
  CHECK_FALSE(up(status_with(first)));

  // A key file others may read: refused, said, and the keys loaded before stay.
  ::chmod(keys.c_str(), 0644);
  REQUIRE(::kill(server.pid(), SIGHUP) == 0);
  CHECK(logged(" error reload refused what=tls"));
  CHECK(up(status_with(second)));
  CHECK(server.stop() == 0);
}
