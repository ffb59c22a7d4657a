// Traces of Pagefile operations: the input of pf-replay.
//
// A trace is text, one operation a line (doc/trace_format.md is the
// reference, since traces also come from other programs):
//
//   open NAME [PAGE_SIZE] [POLICY]     POLICY: random | sequential | looping
//   read NAME PAGE
//   write NAME PAGE
//   sync NAME
//   truncate NAME PAGES
//   close NAME
//   # a comment; blank lines are ignored
//
// A trace is parsed and checked whole before anything runs, so a typo on
// line 90000 costs nothing but the message naming it.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pf_replay {

enum class OpKind : uint8_t { kOpen, kRead, kWrite, kSync, kTruncate, kClose };

// The word of the operation in a trace: "open", "read", ...
std::string_view op_name(OpKind kind);

struct TraceOp {
  OpKind kind = OpKind::kOpen;
  // Index into Trace::files.
  uint32_t file = 0;
  // The line of the trace it came from (1-based), for messages.
  uint32_t line = 0;
  // read, write: the page. truncate: the new size in pages.
  int64_t page = 0;
  // open: the page size, or 0 when the trace leaves it to the file (the
  // recorded size of an existing file, the default for a new one).
  uint32_t page_size = 0;
  // open: the declared access type; unset leaves it to the file.
  std::optional<pagefile::AccessType> policy;
};

struct Trace {
  // Names the trace in messages: its path, or "<stdin>".
  std::string source;
  // Every file the trace names, in order of first appearance.
  std::vector<std::string> files;
  std::vector<TraceOp> ops;
};

// Parses a whole trace. `source` names it in messages. On the first bad line
// returns kInvalidArgument with a message such as
//   "t.trace:17: read: page 'x' is not a number"
// Besides each line's syntax it checks that every read, write, sync, truncate
// and close names a file the trace has opened and not closed since, and that
// no file is opened twice without a close between. Files still open at the
// end are allowed (the replay closes them).
pagefile::Result<Trace> parse_trace(std::string_view text, std::string_view source);

// Reads and parses the trace at `path`; "-" reads standard input. kNotFound
// or kIOError when the file cannot be read, else as parse_trace.
pagefile::Result<Trace> load_trace(const std::string& path);

// The line (without newline) that parses back to `op` on a file named
// `file_name`.
std::string format_op(const TraceOp& op, std::string_view file_name);

}  // namespace pf_replay
