// pf-replay against remote Pagefiles, as a user runs it: the built binary
// with --bus, first over in-process servers (inproc:3, data under
// $PAGEFILE_HOME), then over two real pagefiled processes on loopback. The
// binaries come from PF_REPLAY, PAGEFILE_ADMIN and PAGEFILED (set by
// tests/tools/meson.build).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/support/server_process.h"
#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"

namespace pagefile::test {
namespace {

constexpr int kFilePages = 512;

// The traces of every remote test: a sequential fill of the file, a random
// mix of reads and writes, and random reads only.
void generate_traces(const std::filesystem::path& dir) {
  const std::string pages = fmt::format("{}", kFilePages);
  generate_trace(dir, "fill.trace",
                 {"--pattern", "sequential", "--file", "data", "--file-pages", pages, "--ops",
                  pages, "--write-ratio", "1"});
  generate_trace(dir, "mix.trace",
                 {"--pattern", "random", "--file", "data", "--file-pages", pages, "--ops", "1500",
                  "--write-ratio", "0.3", "--seed", "5"});
  generate_trace(dir, "read.trace",
                 {"--pattern", "random", "--file", "data", "--file-pages", pages, "--ops", "1000",
                  "--seed", "6"});
}

// Runs `pf-replay run ARGS` and checks that it passed its own checks.
Outcome run_clean(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  const EnvVars& env = {}) {
  std::vector<std::string> full = {"run"};
  full.insert(full.end(), args.begin(), args.end());
  Outcome run = pf_replay(dir, full, env);
  INFO(fmt::format("pf-replay {}", fmt::join(full, " ")));
  INFO(run.err);
  INFO(run.out);
  CHECK(run.exit_status == 0);
  CHECK(run.err == "");
  CHECK(run.out.find("0 mismatches, 0 errors, 0 skipped") != std::string::npos);
  return run;
}

// The fill, the mix at two levels and a read-back, each run a process of its
// own, so every run after the first reads pages that an earlier process
// wrote: the pages must have outlived it on the servers. `bus_args` are the
// --bus and placement options.
void fill_mix_and_read_back(const std::filesystem::path& dir,
                            const std::vector<std::string>& bus_args, const EnvVars& env,
                            const std::string& expected_bus,
                            const std::string& expected_placement) {
  auto with = [&](std::vector<std::string> args) {
    args.insert(args.end(), bus_args.begin(), bus_args.end());
    args.insert(args.end(), {"--csv", "runs.csv"});
    return args;
  };
  Outcome fill = run_clean(dir, with({"fill.trace", "--concurrency", "12"}), env);
  CHECK(fill.out.find(fmt::format("{} pages (0 reads, {} writes)", kFilePages, kFilePages)) !=
        std::string::npos);
  CHECK(fill.out.find(", remote (bus ") != std::string::npos);
  for (const char* concurrency : {"1", "12"}) {
    CAPTURE(concurrency);
    Outcome mix = run_clean(dir, with({"mix.trace", "--concurrency", concurrency}), env);
    CHECK(mix.out.find("1500 pages") != std::string::npos);
    // Every page was written by the fill, so no read finds zeros or the end.
    CHECK(mix.out.find("stamped pages, 0 zero pages, 0 beyond the end") != std::string::npos);
  }
  Outcome read = run_clean(dir, with({"read.trace", "--concurrency", "8"}), env);
  CHECK(read.out.find("1000 pages (1000 reads, 0 writes)") != std::string::npos);
  CHECK(read.out.find("reads found 1000 stamped pages, 0 zero pages, 0 beyond the end") !=
        std::string::npos);

  const std::vector<CsvRow> rows = csv_rows(dir / "runs.csv");
  REQUIRE(rows.size() == 4);
  for (const CsvRow& row : rows) {
    CHECK(row.at("location") == "remote");
    CHECK(row.at("bus") == expected_bus);
    CHECK(row.at("placement") == expected_placement);
    CHECK(row.at("errors") == "0");
    CHECK(row.at("mismatches") == "0");
    CHECK(row.at("page_size") == "8192");
  }
}

TEST_CASE("pf-replay over an in-process bus: stripe and hash placements pass fill, random and "
          "read-back runs") {
  struct Case {
    std::vector<std::string> args;
    std::string csv_placement;
    std::string admin_placement;  // what `pagefile stat` prints
  };
  const Case cases[] = {
      {{"--bus", "inproc:3", "--placement", "stripe", "--stripe-pages", "4"}, "stripe:4",
       "placement stripe, 4 pages per unit"},
      {{"--bus", "inproc:3", "--placement", "hash"}, "hash", "placement hash\n"},
      {{"--bus", "inproc:3", "--placement", "hash", "--replicas", "2"}, "hash+r2", "replicas 2\n"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.csv_placement);
    TempDir dir;
    generate_traces(dir.path());
    const EnvVars env = {{"PAGEFILE_HOME", (dir / "home").string()}, {"PAGEFILE_BUS", ""}};
    fill_mix_and_read_back(dir.path(), c.args, env, "inproc:3", c.csv_placement);

    // The catalog recorded the placement asked for, over all three servers.
    Outcome stat = pagefile_admin(dir.path(), {"stat", "data", "--bus", "inproc:3"}, env);
    INFO(stat.err);
    CHECK(stat.exit_status == 0);
    CHECK(stat.out.find(c.admin_placement) != std::string::npos);
    CHECK(stat.out.find(fmt::format("size {} pages", kFilePages)) != std::string::npos);
    CHECK(stat.out.find("servers inproc:") != std::string::npos);
    // Nothing was written next to the traces: the data is under the home.
    CHECK_FALSE(std::filesystem::exists(dir / "data"));
    CHECK(std::filesystem::exists(dir / "home"));
  }
}

TEST_CASE("pf-replay against two pagefiled processes on loopback") {
  TempDir dir;
  generate_traces(dir.path());
  ServerProcess first("tcp://127.0.0.1:0", dir / "server-1");
  ServerProcess second("tcp://127.0.0.1:0", dir / "server-2");
  const std::string bus = first.address() + "," + second.address();
  // The CSV's bus field: the same list, separated by spaces.
  const std::string csv_bus = first.address() + " " + second.address();
  fill_mix_and_read_back(dir.path(), {"--bus", bus}, {}, csv_bus, "stripe");

  Outcome ls = pagefile_admin(dir.path(), {"ls", "--bus", bus});
  INFO(ls.err);
  CHECK(ls.exit_status == 0);
  CHECK(ls.out.find("stripe on 2 servers  data") != std::string::npos);

  // Import and export through the admin CLI round-trip a local file.
  std::string blob;
  for (int i = 0; i < 3 * 4096 + 100; ++i) blob += static_cast<char>(i * 7 + i / 4096);
  write_file(dir / "blob", blob);
  Outcome import = pagefile_admin(dir.path(), {"import", "blob", "blob", "--bus", bus,
                                               "--page-size", "4096", "--placement", "hash"});
  INFO(import.err);
  CHECK(import.exit_status == 0);
  CHECK(import.out.find("4 pages of 4096 B (last page padded with zeros)") != std::string::npos);
  Outcome exported = pagefile_admin(dir.path(), {"export", "blob", "blob.out", "--bus", bus});
  INFO(exported.err);
  CHECK(exported.exit_status == 0);
  blob.resize(4 * 4096, '\0');
  CHECK(read_file(dir / "blob.out") == blob);

  CHECK(first.stop() == 0);
  CHECK(second.stop() == 0);
}

TEST_CASE("pf-replay --schedule balanced reorders runs of reads only, and every page still checks") {
  TempDir dir;
  generate_traces(dir.path());
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::string bus;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(std::make_unique<ServerProcess>(
        "tcp://127.0.0.1:0", dir / fmt::format("server-{}", i)));
    bus += (bus.empty() ? "" : ",") + servers.back()->address();
  }
  run_clean(dir.path(), {"fill.trace", "--bus", bus, "--concurrency", "12"});
  // Reads only: one run of 1000 reads, issued out of trace order.
  Outcome read = run_clean(dir.path(), {"read.trace", "--bus", bus, "--concurrency", "6",
                                        "--schedule", "balanced"});
  CHECK(read.out.find("1000 pages (1000 reads, 0 writes)") != std::string::npos);
  CHECK(read.out.find("reads found 1000 stamped pages, 0 zero pages, 0 beyond the end") !=
        std::string::npos);
  // Reads and writes mixed: a read after a write of its page must see it, so
  // only the reads between two writes may move; every read is checked
  // against the version the trace implies.
  for (const char* concurrency : {"1", "12"}) {
    CAPTURE(concurrency);
    Outcome mix = run_clean(dir.path(), {"mix.trace", "--bus", bus, "--concurrency", concurrency,
                                         "--schedule", "balanced"});
    CHECK(mix.out.find("1500 pages") != std::string::npos);
  }
  Outcome bad = pf_replay(dir.path(), {"run", "read.trace", "--bus", bus, "--schedule", "fastest"});
  CHECK(bad.exit_status == 2);
  CHECK(bad.err.find("--schedule") != std::string::npos);
  for (auto& server : servers) CHECK(server->stop() == 0);
}

}  // namespace
}  // namespace pagefile::test
