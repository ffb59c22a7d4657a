// The replay driver in-process: what it counts, what it expects of each read
// (versions, truncation, pages of earlier runs), and its CSV.
#include "tools/pf_replay/replay.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "tests/support/page_file.h"
#include "tests/support/stream_capture.h"
#include "tests/support/temp_dir.h"
#include "tools/pf_replay/page_stamp.h"

namespace pf_replay {
namespace {

using pagefile::Code;
// Reports of a replay, gathered in memory.
using ReportCapture = pagefile::test::StreamCapture;

struct Run {
  ReplayStats stats;
  std::string report;
};

Run replay_text(const std::string& text, const std::filesystem::path& dir, uint32_t concurrency,
                uint64_t version_base = 0, bool checksums = true) {
  pagefile::Result<Trace> trace = parse_trace(text, "t.trace");
  REQUIRE_OK(trace);
  ReportCapture report;
  ReplayOptions options;
  options.dir = dir;
  options.concurrency = concurrency;
  options.version_base = version_base;
  options.checksums = checksums;
  options.show_progress = false;
  options.report = report.file();
  pagefile::Result<ReplayStats> stats = replay_trace(*trace, options);
  REQUIRE_OK(stats);
  return {*stats, report.text()};
}

std::string lines(std::string_view head, int64_t first, int64_t last, std::string_view file) {
  std::string out;
  for (int64_t p = first; p <= last; ++p) out += fmt::format("{} {} {}\n", head, file, p);
  return out;
}

// A run that reported nothing: no error, and every page it read as expected.
void check_clean(const Run& run) {
  CHECK(run.report == "");
  CHECK(run.stats.errors == 0);
  CHECK(run.stats.mismatches == 0);
}

// An earlier run that writes pages 0 to last of `data`, for a later run to
// read back.
void write_earlier_run(const std::filesystem::path& dir, uint32_t page_size, int64_t last) {
  Run run = replay_text(fmt::format("open data {}\n", page_size) + lines("write", 0, last, "data") +
                            "close data\n",
                        dir, 4);
  REQUIRE(run.stats.mismatches == 0);
}

TEST_CASE("writes then reads of one run check out at every concurrency") {
  for (uint32_t concurrency : {1u, 4u, 16u}) {
    CAPTURE(concurrency);
    pagefile::test::TempDir dir;
    // Each page is written twice and read after each write, so a read that
    // saw the older write would show as a version mismatch.
    std::string text = "open data 4096\n";
    for (int64_t p = 0; p < 64; ++p) {
      text += fmt::format("write data {0}\nread data {0}\nwrite data {0}\nread data {0}\n", p);
    }
    text += "sync data\nclose data\n";
    Run run = replay_text(text, dir.path(), concurrency);
    check_clean(run);
    CHECK(run.stats.ops == 64 * 4 + 3);
    CHECK(run.stats.reads == 128);
    CHECK(run.stats.writes == 128);
    CHECK(run.stats.pages() == 256);
    CHECK(run.stats.bytes == 256 * 4096);
    CHECK(run.stats.syncs == 1);
    CHECK(run.stats.page_size == 4096);
    CHECK(run.stats.concurrency == concurrency);
    CHECK(run.stats.seconds > 0.0);
  }
}

TEST_CASE("pages never written read as zeros or beyond the end") {
  pagefile::test::TempDir dir;
  Run run = replay_text("open data 512\nwrite data 10\nread data 3\nread data 11\nread data 500\n",
                        dir.path(), 4);
  check_clean(run);
  CHECK(run.stats.reads == 3);
}

TEST_CASE("a page truncated away must read as zeros, until written again") {
  pagefile::test::TempDir dir;
  std::string text = "open data 1024\n" + lines("write", 0, 9, "data") +
                     "truncate data 5\n"
                     "read data 4\nread data 5\nread data 9\n"
                     "write data 7\nread data 7\nread data 6\n"
                     "truncate data 20\nread data 15\nread data 7\n"
                     "close data\n";
  Run run = replay_text(text, dir.path(), 8);
  check_clean(run);
  CHECK(run.stats.truncates == 2);
}

TEST_CASE("a later run checks the pages of an earlier one, and its own truncation") {
  pagefile::test::TempDir dir;
  write_earlier_run(dir.path(), 2048, 31);
  Run second = replay_text("open data\n" + lines("read", 0, 40, "data") +
                               "truncate data 8\nread data 9\nclose data\n",
                           dir.path(), 12);
  check_clean(second);
  CHECK(second.stats.reads == 42);
  CHECK(second.stats.page_size == 2048);
}

TEST_CASE("a page of another file, or damaged, is a mismatch naming file and page") {
  pagefile::test::TempDir dir;
  write_earlier_run(dir.path(), 4096, 3);
  std::filesystem::copy_file(dir / "data", dir / "copy");
  pagefile::test::damage_page(dir / "data", 2, 100);
  const std::string text = "open data\nopen copy\n" + lines("read", 0, 3, "data") + "read copy 1\n";
  // The store's checksum stops the damaged page: an error naming it. The
  // copy's pages pass it (they are whole), and the stamp says whose they are.
  Run checked = replay_text(text, dir.path(), 4);
  CHECK(checked.stats.mismatches == 1);
  CHECK(checked.stats.errors == 1);
  CHECK(checked.report.find("t.trace:5: read data 2: Corruption") != std::string::npos);
  CHECK(checked.report.find("page 2 fails its checksum on disk") != std::string::npos);
  // Without checksums (only to measure their cost), pf-replay's stamp
  // catches the damage itself.
  Run second = replay_text(text, dir.path(), 4, 0, /*checksums=*/false);
  CHECK(second.stats.mismatches == 2);
  CHECK(second.stats.errors == 0);
  CHECK(second.report.find("t.trace:5: file data page 2: bad checksum") != std::string::npos);
  CHECK(second.report.find("t.trace:7: file copy page 1: belongs to file 'data' instead of "
                           "'copy'") != std::string::npos);
}

TEST_CASE("API errors are counted and reported; a failed open skips its file's ops") {
  pagefile::test::TempDir dir;
  REQUIRE(replay_text("open data 4096\nwrite data 0\n", dir.path(), 1).stats.errors == 0);
  Run run = replay_text("open data 8192\nread data 0\nwrite data 1\nclose data\n"
                        "open data 4096\nread data 0\n",
                        dir.path(), 2);
  CHECK(run.stats.errors == 1);
  CHECK(run.stats.skipped == 3);
  CHECK(run.stats.reads == 1);
  CHECK(run.stats.mismatches == 0);
  CHECK(run.report.find("error: t.trace:1: open data: InvalidArgument") != std::string::npos);
}

TEST_CASE("equal version bases write equal bytes, whatever the concurrency") {
  pagefile::test::TempDir one;
  pagefile::test::TempDir many;
  std::string text = "open data 1024\n";
  for (int64_t i = 0; i < 200; ++i) text += fmt::format("write data {}\n", (i * 37) % 50);
  text += "close data\n";
  REQUIRE(replay_text(text, one.path(), 1, 777).stats.mismatches == 0);
  REQUIRE(replay_text(text, many.path(), 16, 777).stats.mismatches == 0);
  const std::string data = pagefile::test::stored_pages(one / "data");
  CHECK(data.size() == 50 * 1024);
  CHECK(data == pagefile::test::stored_pages(many / "data"));
  // And the last write of page 0 (write number 151: i = 150) is what it holds.
  std::vector<std::byte> page0(1024);
  std::memcpy(page0.data(), data.data(), 1024);
  CHECK_OK(verify_stamp(page0, "data", 0, 777 + 151));
}

TEST_CASE("a concurrency of 0 is refused") {
  pagefile::Result<Trace> trace = parse_trace("", "t.trace");
  REQUIRE_OK(trace);
  ReplayOptions options;
  options.concurrency = 0;
  CHECK_CODE(replay_trace(*trace, options), Code::kInvalidArgument);
}

TEST_CASE("the CSV has the required columns first, one row per run, one header") {
  const std::string header = csv_header();
  CHECK(header.starts_with(
      "ops,pages,seconds,ms_per_page,pages_per_s,mb_per_s,concurrency,page_size,"));
  ReplayStats stats;
  stats.ops = 12;
  stats.reads = 6;
  stats.writes = 4;
  stats.bytes = 10 * 8192;
  stats.seconds = 0.5;
  stats.concurrency = 12;
  stats.page_size = 8192;
  const std::string row = csv_row(stats, "a,b.trace");
  CHECK(row.starts_with("12,10,0.500000,50.000000,20.0,0.164,12,8192,6,4,"));
  CHECK(row.find(",local,\"a,b.trace\",") != std::string::npos);
  auto count = [](const std::string& line) { return std::count(line.begin(), line.end(), ','); };
  CHECK(count(row) == count(header) + 1);  // the quoted comma

  CHECK(row.ends_with(",,,,0,0,0,0"));  // local: no bus, no placement; no file opened, no pool

  // Remote rows name the bus (spaces for commas, so no quoting) and the
  // placement asked for, with its unit when it is not 1.
  ReplayStats remote = stats;
  remote.location = pagefile::Location::kRemote;
  remote.bus = "tcp://a:1,tcp://b:2";
  remote.layout.placement = pagefile::Placement::kHash;
  remote.layout.stripe_pages = 4;
  const std::string remote_row = csv_row(remote, "t");
  CHECK(remote_row.find(",remote,t,") != std::string::npos);
  CHECK(remote_row.ends_with(",tcp://a:1 tcp://b:2,hash:4,,0,0,0,0"));
  CHECK(count(remote_row) == count(header));
  remote.layout.placement = pagefile::Placement::kStripe;
  remote.layout.stripe_pages = 1;
  remote.policy = "looping";
  remote.hits = 7;
  remote.misses = 3;
  remote.prefetch_used = 2;
  remote.prefetch_wasted = 1;
  CHECK(csv_row(remote, "t").ends_with(",tcp://a:1 tcp://b:2,stripe,looping,7,3,2,1"));
  CHECK(format_summary(Trace{.source = "t.trace"}, remote)
            .starts_with("t.trace: 12 ops in 0.500 s at concurrency 12, page size 8192, remote "
                         "(bus tcp://a:1,tcp://b:2, stripe)\n"));

  ReplayStats idle;  // no pages: the ratios are left empty, not made up
  CHECK(csv_row(idle, "t").starts_with("0,0,0.000000,,,,0,0,"));

  pagefile::test::TempDir dir;
  const auto path = dir / "runs.csv";
  CHECK(*check_csv(path));
  REQUIRE_OK(append_csv(path, stats, "t"));
  REQUIRE_OK(append_csv(path, stats, "t"));
  CHECK_FALSE(*check_csv(path));
  std::ifstream in(path);
  std::string line;
  std::vector<std::string> read_lines;
  while (std::getline(in, line)) read_lines.push_back(line);
  REQUIRE(read_lines.size() == 3);
  CHECK(read_lines[0] == header);
  CHECK(read_lines[1] == read_lines[2]);

  const auto foreign = dir / "foreign.csv";
  std::ofstream(foreign) << "a,b,c\n1,2,3\n";
  CHECK_CODE(check_csv(foreign), Code::kInvalidArgument);
  CHECK_CODE(append_csv(foreign, stats, "t"), Code::kInvalidArgument);
  const auto empty = dir / "empty.csv";
  std::ofstream{empty};
  CHECK(*check_csv(empty));
}

}  // namespace
}  // namespace pf_replay
