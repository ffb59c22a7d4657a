// pf-replay: the workload-replay driver (Pagefile paper, section 4.4.3).
//
//   pf-replay generate --pattern random --file data --file-pages 2048 --ops 3000 > t.trace
//   pf-replay run t.trace --dir /tmp/pf --concurrency 12 --csv runs.csv
//   pf-replay run t.trace --bus tcp://127.0.0.1:7001,tcp://127.0.0.1:7002 --concurrency 12
//
// Exit statuses (doc/trace_format.md): 0 success, 1 a page read back wrong,
// 2 a usage or trace error (nothing was run), 3 a Pagefile API or I/O error.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bus/bus_config.h"
#include "pagefile/options.h"
#include "pagefile/status.h"
#include "tools/pf_replay/generate.h"
#include "tools/pf_replay/replay.h"
#include "tools/pf_replay/stats.h"
#include "tools/pf_replay/trace.h"
#include "tools/common/flag_checks.h"
#include "tools/common/tls_flags.h"

namespace {

using pf_replay::GenerateOptions;
using pf_replay::ReplayOptions;

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitUsage = 2;
constexpr int kExitIoError = 3;

int fail(int exit_status, const pagefile::Status& status) {
  fmt::print(stderr, "pf-replay: {}\n", status.message());
  return exit_status;
}

// Adds `name` to `command`: one word of `choices`, into `value`, whose
// initial word is shown as the default.
CLI::Option* add_choice(CLI::App& command, const std::string& name, std::string& value, const std::string& help,
                        const std::vector<std::string>& choices) {
  return command.add_option(name, value, help)->check(CLI::IsMember(choices))->capture_default_str();
}

int run_generate(const GenerateOptions& options) {
  if (pagefile::Status s = pf_replay::check_generate_options(options); !s) {
    return fail(kExitUsage, s);
  }
  // Lines are gathered in a buffer and written in large blocks: a trace of
  // millions of ops should cost the time of writing it, not of a syscall per
  // line.
  fmt::memory_buffer out;
  bool write_failed = false;
  auto flush = [&] {
    if (!write_failed && std::fwrite(out.data(), 1, out.size(), stdout) != out.size()) {
      write_failed = true;
    }
    out.clear();
  };
  fmt::format_to(std::back_inserter(out), "# {}\n", pf_replay::generate_command_line(options));
  pagefile::Status s = pf_replay::generate_trace(options, [&](const pf_replay::TraceOp& op) {
    fmt::format_to(std::back_inserter(out), "{}\n", pf_replay::format_op(op, options.file));
    if (out.size() >= (1 << 16)) flush();
  });
  if (!s) return fail(kExitUsage, s);
  flush();
  if (std::fflush(stdout) != 0 || write_failed) {
    return fail(kExitIoError, pagefile::Status::io_error("standard output", "cannot write the trace"));
  }
  return kExitOk;
}

// Loads the trace at `path`; on failure prints why and sets `exit_status`
// (a bad or missing trace is a usage error).
std::optional<pf_replay::Trace> load_or_fail(const std::string& path, int& exit_status) {
  pagefile::Result<pf_replay::Trace> trace = pf_replay::load_trace(path);
  if (trace) return std::move(*trace);
  const bool usage = trace.status().is(pagefile::Code::kInvalidArgument) ||
                     trace.status().is(pagefile::Code::kNotFound);
  exit_status = fail(usage ? kExitUsage : kExitIoError, trace.status());
  return std::nullopt;
}

int run_stats(const std::string& trace_path, const std::vector<uint32_t>& pool_pages, uint32_t read_ahead,
              const std::string& csv_path) {
  int exit_status = kExitOk;
  std::optional<pf_replay::Trace> trace = load_or_fail(trace_path, exit_status);
  if (!trace) return exit_status;
  pagefile::Result<pf_replay::TraceStats> stats = pf_replay::trace_stats(*trace, pool_pages, read_ahead);
  if (!stats) return fail(kExitUsage, stats.status().with_context("--pool-pages"));
  fmt::print("{}", pf_replay::format_stats(*trace, *stats, read_ahead));
  std::fflush(stdout);
  if (!csv_path.empty()) {
    if (pagefile::Status s = pf_replay::write_stats_csv(csv_path, *stats); !s) return fail(kExitIoError, s);
  }
  return kExitOk;
}

int run_replay(const std::string& trace_path, ReplayOptions options, const std::string& csv_path) {
  if (options.page_size != 0) {
    if (pagefile::Status s = pagefile::check_page_size(options.page_size); !s) {
      return fail(kExitUsage, pagefile::Status::invalid_argument(
                                  fmt::format("--page-size {}", options.page_size),
                                  fmt::format("must be a power of two in [{}, {}]",
                                              pagefile::kMinPageSize, pagefile::kMaxPageSize)));
    }
  }
  // Every complaint about the command line or the trace comes before the
  // first page is touched, so a bad invocation never leaves a half-run.
  if (options.location == pagefile::Location::kRemote) {
    // Only the syntax (and an @file's content): whether the servers answer
    // shows at the first open.
    if (pagefile::Result<pagefile::net::BusConfig> bus = pagefile::net::parse_bus(options.bus, {});
        !bus) {
      return fail(kExitUsage, bus.status().with_context("--bus"));
    }
  }
  int load_status = kExitOk;
  std::optional<pf_replay::Trace> trace = load_or_fail(trace_path, load_status);
  if (!trace) return load_status;
  if (!trace->data_path.empty()) {
    // A captured trace names its files as the application did: replayed
    // in the directory it came from, it would write over them.
    if (options.location == pagefile::Location::kLocal && !options.dir_given) {
      return fail(kExitUsage, pagefile::Status::invalid_argument(
                                  trace_path, "is a captured trace (it has a data line): say where to replay it, "
                                              "--dir DIR (not the captured files' own) or --bus BUS"));
    }
    if (options.page_size != 0) {
      return fail(kExitUsage, pagefile::Status::invalid_argument(
                                  fmt::format("--page-size {}", options.page_size),
                                  "cannot change the pages of a captured trace (its writes carry their bytes)"));
    }
  }
  if (!csv_path.empty()) {
    pagefile::Result<bool> csv = pf_replay::check_csv(csv_path);
    if (!csv) {
      return fail(csv.status().is(pagefile::Code::kInvalidArgument) ? kExitUsage : kExitIoError,
                  csv.status());
    }
  }
  std::error_code error;
  std::filesystem::create_directories(options.dir, error);
  if (error) {
    return fail(kExitIoError, pagefile::Status::io_error(options.dir.string(), error.message()));
  }

  pagefile::Result<pf_replay::ReplayStats> stats = pf_replay::replay_trace(*trace, options);
  if (!stats) return fail(kExitIoError, stats.status());
  fmt::print("{}", pf_replay::format_summary(*trace, *stats));
  std::fflush(stdout);

  int exit_status = kExitOk;
  if (!csv_path.empty()) {
    if (pagefile::Status s = pf_replay::append_csv(csv_path, *stats, trace_path); !s) {
      fail(kExitIoError, s);
      exit_status = kExitIoError;
    }
  }
  if (stats->errors > 0) return kExitIoError;
  if (stats->mismatches > 0) return kExitMismatch;
  return exit_status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pf-replay: generate traces of Pagefile operations and replay them against "
               "local or remote Pagefiles, timing the run and checking every page read."};
  app.require_subcommand(1);

  GenerateOptions generate;
  std::string pattern = "random";
  CLI::App* generate_command =
      app.add_subcommand("generate", "Print a synthetic trace on standard output.");
  generate_command->add_option("--pattern", pattern, "random, sequential or looping")
      ->required()
      ->check(CLI::IsMember({"random", "sequential", "looping"}));
  generate_command->add_option("--file", generate.file, "the Pagefile's name")->required();
  generate_command->add_option("--file-pages", generate.file_pages, "pages in the file (P)")
      ->required()
      ->check(CLI::PositiveNumber);
  generate_command->add_option("--ops", generate.ops, "read and write operations")
      ->required()
      ->check(CLI::NonNegativeNumber);
  generate_command
      ->add_option("--write-ratio", generate.write_ratio,
                   "share of the ops that write, 0 (only reads) to 1 (only writes)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  // (Unsigned flags need a Range or kNotNegative: CLI11 takes "-1" as the
  // type's largest value, tools/common/flag_checks.h.)
  generate_command->add_option("--page-size", generate.page_size, "page size in bytes")
      ->capture_default_str()
      ->check(CLI::Range(pagefile::kMinPageSize, pagefile::kMaxPageSize));
  generate_command->add_option("--seed", generate.seed, "seed of the generator")
      ->capture_default_str()
      ->check(pagefile::tools::kNotNegative);
  generate_command->add_option("--loop-pages", generate.loop_pages,
                               "looping: pages in one loop (default: the whole file)");
  generate_command->add_option("--hot-pages", generate.hot_pages,
                               "random: a hot set of pages [0, H) that --hot-share of the ops read");
  generate_command->add_option("--hot-share", generate.hot_share,
                               "random: share of the ops on the hot set")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();

  std::string trace_path;
  std::string csv_path;
  std::string dir = ".";
  ReplayOptions replay;
  bool no_progress = false;
  std::string bus;
  std::string placement = "stripe";
  CLI::App* run_command = app.add_subcommand(
      "run", "Replay a trace against local Pagefiles, or remote ones with --bus; print a "
             "summary, exit non-zero on any error or mismatch.");
  run_command->add_option("TRACE", trace_path, "the trace file, or - for standard input")
      ->required();
  run_command->add_option("--dir", dir, "directory of the local Pagefiles (created when missing)")
      ->capture_default_str();
  pagefile::tools::TlsFlags tls;
  pagefile::tools::add_tls_flags(*run_command, tls);
  CLI::Option* bus_option = run_command->add_option(
      "--bus", bus,
      "open every file remote, on these page servers: tcp://HOST:PORT,unix:/PATH,... or "
      "inproc:N (N servers in this process, data under $PAGEFILE_HOME) or @FILE");
  add_choice(*run_command, "--placement", placement,
             "placement of the remote files the replay creates: stripe or hash", {"stripe", "hash"})
      ->needs(bus_option);
  run_command
      ->add_option("--stripe-pages", replay.layout.stripe_pages,
                   "pages per placement unit of the remote files the replay creates")
      ->check(CLI::Range(1u, 1u << 20))
      ->needs(bus_option)
      ->capture_default_str();
  run_command
      ->add_option("--replicas", replay.layout.replicas,
                   "copies of each page of the remote files the replay creates, each on its own server "
                   "(default: the bus's replicas=, else 1)")
      ->check(CLI::Range(1u, pagefile::kMaxReplicas))
      ->needs(bus_option);
  std::string checksums = "on";
  add_choice(*run_command, "--checksums", checksums,
             "page checksums (off: only to measure what they cost; with pagefiled --no-checksums)", {"on", "off"});
  run_command
      ->add_option("--concurrency", replay.concurrency,
                   "tickets kept outstanding, and the client's concurrency level")
      ->check(CLI::Range(1u, 4096u))
      ->capture_default_str();
  run_command
      ->add_option("--window", replay.window,
                   "the client's concurrency level (requests in flight per file, read-ahead included), "
                   "when it differs from --concurrency: --concurrency 1 --window N reads as SQLite does")
      ->check(CLI::Range(1u, 4096u));
  std::string schedule = "trace";
  add_choice(*run_command, "--schedule", schedule,
             "trace: issue in the trace's order; balanced: issue each run of reads of a file "
             "so that its servers are evenly busy (a read-only run may be reordered)",
             {"trace", "balanced"});
  std::string pace = "none";
  add_choice(*run_command, "--pace", pace,
             "none: as fast as the window allows; captured: each operation with a timestamp (@MICROS) "
             "no earlier than it was captured, from the start of the run",
             {"none", "captured"});
  run_command->add_option("--page-size", replay.page_size,
                          "page size of every open, instead of the trace's")
      ->check(CLI::Range(pagefile::kMinPageSize, pagefile::kMaxPageSize));
  run_command->add_option("--policy", replay.policy,
                          "buffer policy of every open, instead of the trace's: random, sequential, "
                          "looping or global-sequential");
  run_command->add_option("--cache-pages", replay.cache_pages,
                          "the client's buffer pool in pages (0: none)")
      ->capture_default_str()
      ->check(pagefile::tools::kNotNegative);
  run_command->add_option("--csv", csv_path,
                          "append one row per run to this CSV file (header when new)");
  run_command->add_option("--version-base", replay.version_base,
                          "versions of this run's writes start after this number (default: "
                          "the time in ns); equal bases make equal files")
      ->check(pagefile::tools::kNotNegative);
  run_command->add_flag("--no-progress", no_progress, "never show the progress line");

  std::string stats_trace;
  std::vector<uint32_t> pool_pages;
  uint32_t read_ahead = 12;
  std::string stats_csv;
  CLI::App* stats_command = app.add_subcommand(
      "stats", "What a trace asks of the store (operations, pages, sequential reads, reuse distances) and "
               "the read hit ratio each built-in policy would get at a few pool sizes: a simulation, no I/O.");
  stats_command->add_option("TRACE", stats_trace, "the trace file, or - for standard input")->required();
  stats_command
      ->add_option("--pool-pages", pool_pages,
                   "pool sizes to simulate, in pages (default: 10%, 25%, 50% and 90% of the pages touched)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  stats_command->add_option("--read-ahead", read_ahead, "pages a policy may fetch ahead (a replay's concurrency)")
      ->check(CLI::Range(0u, 4096u))
      ->capture_default_str();
  stats_command->add_option("--csv", stats_csv, "write policy,pool_pages,hit_ratio rows to this file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? kExitOk : kExitUsage;
  }

  if (*generate_command) {
    generate.pattern = *pagefile::parse_access_type(pattern);
    return run_generate(generate);
  }
  if (*stats_command) return run_stats(stats_trace, pool_pages, read_ahead, stats_csv);
  replay.dir = dir;
  replay.dir_given = run_command->count("--dir") > 0;
  replay.schedule = schedule == "balanced" ? pf_replay::Schedule::kBalanced : pf_replay::Schedule::kTrace;
  if (*bus_option) {
    replay.location = pagefile::Location::kRemote;
    replay.bus = pagefile::tools::bus_with_tls(bus, tls);
    replay.layout.placement = *pagefile::parse_placement(placement);
  }
  replay.checksums = checksums == "on";
  replay.pace_captured = pace == "captured";
  replay.show_progress = !no_progress;
  return run_replay(trace_path, replay, csv_path);
}
