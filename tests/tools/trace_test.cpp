// Trace parsing: the format of doc/trace_format.md, and that every kind of
// bad line is refused with its line number before anything runs.
#include "tools/pf_replay/trace.h"

#include <string>
#include <utility>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

namespace pf_replay {
namespace {

using pagefile::AccessType;
using pagefile::Code;

// The message of the error parsing `text` gives (empty when it parses).
std::string parse_error(std::string_view text) {
  pagefile::Result<Trace> trace = parse_trace(text, "t.trace");
  if (trace) return {};
  CHECK(trace.status().code() == Code::kInvalidArgument);
  return trace.status().message();
}

// `text` parsed; REQUIREs that it parses.
Trace parsed(std::string_view text) {
  pagefile::Result<Trace> trace = parse_trace(text, "t.trace");
  REQUIRE_OK(trace);
  return std::move(*trace);
}

TEST_CASE("every operation parses, with comments, blank lines and CRLF") {
  const std::string text =
      "# a trace\n"
      "\n"
      "open data 8192 looping\n"
      "open log\r\n"
      "   \t \n"
      "open idx random   # policy without a page size\n"
      "open big 65536\n"
      "read data 0\n"
      "write data 70368744177663\n"
      "sync data\n"
      "truncate data 0\n"
      "close data\n"
      "open data\n"
      "close log\n";
  const Trace trace = parsed(text);
  CHECK(trace.source == "t.trace");
  REQUIRE(trace.files == std::vector<std::string>{"data", "log", "idx", "big"});
  REQUIRE(trace.ops.size() == 11);

  const TraceOp& open_data = trace.ops[0];
  CHECK(open_data.kind == OpKind::kOpen);
  CHECK(open_data.file == 0);
  CHECK(open_data.line == 3);
  CHECK(open_data.page_size == 8192);
  CHECK(open_data.policy == AccessType::kLooping);

  CHECK(trace.ops[1].page_size == 0);
  CHECK_FALSE(trace.ops[1].policy.has_value());
  CHECK(trace.ops[1].line == 4);
  CHECK(trace.ops[2].page_size == 0);
  CHECK(trace.ops[2].policy == AccessType::kRandom);
  CHECK(trace.ops[3].page_size == 65536);

  CHECK(trace.ops[4].kind == OpKind::kRead);
  CHECK(trace.ops[4].page == 0);
  CHECK(trace.ops[5].kind == OpKind::kWrite);
  CHECK(trace.ops[5].page == pagefile::kMaxPageNumber);
  CHECK(trace.ops[6].kind == OpKind::kSync);
  CHECK(trace.ops[7].kind == OpKind::kTruncate);
  CHECK(trace.ops[7].page == 0);
  CHECK(trace.ops[8].kind == OpKind::kClose);
  CHECK(trace.ops[9].kind == OpKind::kOpen);
  CHECK(trace.ops[9].line == 13);
  CHECK(trace.ops[10].file == 1);
}

TEST_CASE("an empty trace and one of comments only are valid") {
  REQUIRE_OK(parse_trace("", "t.trace"));
  const Trace trace = parsed("# nothing\n\n#\n");
  CHECK(trace.ops.empty());
}

TEST_CASE("format_op writes lines that parse back to the same ops") {
  const std::string text =
      "open data 4096 sequential\nopen idx\nread data 7\nwrite idx 9\nsync idx\n"
      "truncate data 3\nclose data\n";
  const Trace trace = parsed(text);
  std::string again;
  for (const TraceOp& op : trace.ops) again += format_op(op, trace.files[op.file]) + "\n";
  CHECK(again == text);
}

TEST_CASE("each malformed line is reported with its line number") {
  const std::string prefix = "# header\nopen data 8192\n";  // the bad line is line 3
  struct Case {
    std::string line;
    std::string message;
  };
  const Case cases[] = {
      {"read data x", "t.trace:3: read: page 'x' is not a number"},
      {"write data 12abc", "t.trace:3: write: page '12abc' is not a number"},
      {"read data -1", "t.trace:3: read: page '-1' is out of range [0, 70368744177663]"},
      {"read data 70368744177664",
       "t.trace:3: read: page '70368744177664' is out of range [0, 70368744177663]"},
      {"read data 99999999999999999999",
       "t.trace:3: read: page '99999999999999999999' is out of range [0, 70368744177663]"},
      {"read data", "t.trace:3: read: expected read NAME PAGE, got 1 argument"},
      {"write data 1 2", "t.trace:3: write: a write with an OFFSET needs a data line before it"},
      {"write data 1 2 3", "t.trace:3: write: expected write NAME PAGE [OFFSET], got 4 arguments"},
      {"unlink data", "t.trace:3: unlink: file 'data' is open (opened on line 2)"},
      {"unlink", "t.trace:3: unlink: expected unlink NAME, got 0 arguments"},
      {"data", "t.trace:3: data: expected data PATH, got 0 arguments"},
      {"@x read data 1", "t.trace:3: timestamp 'x' is not a number"},
      {"@-5 read data 1", "t.trace:3: timestamp '-5' is out of range [0, 9223372036854775807]"},
      {"@7", "t.trace:3: a timestamp without an operation"},
      {"sync", "t.trace:3: sync: expected sync NAME, got 0 arguments"},
      {"close data now", "t.trace:3: close: expected close NAME, got 2 arguments"},
      {"truncate data", "t.trace:3: truncate: expected truncate NAME PAGES, got 1 argument"},
      {"truncate data many", "t.trace:3: truncate: pages 'many' is not a number"},
      {"open", "t.trace:3: open: expected open NAME [PAGE_SIZE] [POLICY], got 0 arguments"},
      {"open other 8192 random extra",
       "t.trace:3: open: expected open NAME [PAGE_SIZE] [POLICY], got 4 arguments"},
      {"open other 1000", "t.trace:3: open: page size 1000 is not a power of two in [512, 65536]"},
      {"open other 131072",
       "t.trace:3: open: page size 131072 is not a power of two in [512, 65536]"},
      {"open other 8192 zigzag",
       "t.trace:3: open: policy 'zigzag' is not random, sequential or looping"},
      {"open other zigzag", "t.trace:3: open: policy 'zigzag' is not random, sequential or looping"},
      {"open other random 8192", "t.trace:3: open: page size 'random' is not a number"},
      {"open data", "t.trace:3: open: file 'data' is already open (opened on line 2)"},
      {"read other 1", "t.trace:3: read: file 'other' is not open"},
      {"erase data 1",
       "t.trace:3: unknown operation 'erase' (expected open, read, write, sync, truncate, close, "
       "unlink, data or a # comment)"},
      {"READ data 1",
       "t.trace:3: unknown operation 'READ' (expected open, read, write, sync, truncate, close, "
       "unlink, data or a # comment)"},
      // Bytes that are not printable are shown escaped, never raw.
      {"\x1b[2Jread data 1",
       "t.trace:3: unknown operation '\\x1b[2Jread' (expected open, read, write, sync, truncate, close, "
       "unlink, data or a # comment)"},
      {"read data 1\x07\xff", "t.trace:3: read: page '1\\x07\\xff' is not a number"},
      {"read \x01oth\x7f" "er 1", "t.trace:3: read: file '\\x01oth\\x7fer' is not open"},
      {std::string("open da\0ta", 10), "t.trace:3: open: file name 'da\\x00ta' contains a NUL byte"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.line);
    CHECK(parse_error(prefix + c.line + "\nclose data\n") == c.message);
  }
}

TEST_CASE("a captured trace: timestamps, a data file, writes with offsets, unlink") {
  const std::string text =
      "data app.trace.data\n"
      "@0 open app.db 4096 random\n"
      "@15 write app.db 0 0\n"
      "@15 write app.db 1 4096\n"
      "@40 read app.db 1\n"
      "@41 sync app.db\n"
      "@90 close app.db\n"
      "@95 unlink app.db\n";
  const Trace trace = parsed(text);
  CHECK(trace.data_path == "app.trace.data");
  CHECK(trace.timed);
  REQUIRE(trace.ops.size() == 7);
  CHECK(trace.ops[1].data_offset == 0);
  CHECK(trace.ops[2].data_offset == 4096);
  CHECK(trace.ops[2].micros == 15);
  CHECK(trace.ops[6].kind == OpKind::kUnlink);
  std::string again = "data app.trace.data\n";
  for (const TraceOp& op : trace.ops) again += format_op(op, trace.files[op.file]) + "\n";
  CHECK(again == text);
  // An untimed trace stays untimed; a generated write has no offset.
  const Trace plain = parsed("open a\nwrite a 3\n");
  CHECK_FALSE(plain.timed);
  CHECK(plain.ops[1].data_offset == -1);
  CHECK(plain.ops[1].micros == -1);

  CHECK(parse_error("data a\ndata b\n") == "t.trace:2: data: a second data line");
  CHECK(parse_error("@5 open a\n@4 read a 1\n") == "t.trace:2: timestamp @4 is before the one of an earlier line (@5)");
  // A file is opened again after its unlink: a new, empty file.
  REQUIRE_OK(parse_trace("open a\nclose a\nunlink a\nopen a\nread a 0\n", "t.trace"));
}

TEST_CASE("operations on a file not open are refused with their line number") {
  CHECK(parse_error("read data 1\n") == "t.trace:1: read: file 'data' is not open");
  CHECK(parse_error("open data\nclose data\n\nwrite data 1\n") ==
        "t.trace:4: write: file 'data' is not open");
  CHECK(parse_error("open data\nclose data\nclose data\n") ==
        "t.trace:3: close: file 'data' is not open");
  CHECK(parse_error("open a\nsync b\n") == "t.trace:2: sync: file 'b' is not open");
  CHECK(parse_error("open a\ntruncate b 0\n") == "t.trace:2: truncate: file 'b' is not open");
}

TEST_CASE("the first bad line is the one reported") {
  CHECK(parse_error("open a\nread a 1\nread a y\nread a z\n") ==
        "t.trace:3: read: page 'y' is not a number");
}

TEST_CASE("load_trace reads a file and names it in messages") {
  pagefile::test::TempDir dir;
  const std::string path = (dir / "w.trace").string();
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("open a\nread a q\n", f);
    std::fclose(f);
  }
  pagefile::Result<Trace> trace = load_trace(path);
  REQUIRE_FALSE(trace.is_ok());
  CHECK(trace.status().message() == path + ":2: read: page 'q' is not a number");
  CHECK_CODE(load_trace((dir / "missing.trace").string()), Code::kNotFound);
}

}  // namespace
}  // namespace pf_replay
