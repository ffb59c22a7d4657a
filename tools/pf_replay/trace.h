// Traces of Pagefile operations: the input of pf-replay.
//
// A trace is text, one operation a line (doc/trace_format.md is the
// reference, since traces also come from other programs; the record of one
// operation, TraceOp, is core/trace_op.h, shared with the VFS's capture):
//
//   [@MICROS] open NAME [PAGE_SIZE] [POLICY]     POLICY: random | sequential | looping
//   [@MICROS] read NAME PAGE
//   [@MICROS] write NAME PAGE [OFFSET]
//   [@MICROS] sync NAME
//   [@MICROS] truncate NAME PAGES
//   [@MICROS] close NAME
//   [@MICROS] unlink NAME
//   data PATH
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

#include "core/trace_op.h"
#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pf_replay {

using pagefile::trace::format_op;
using pagefile::trace::kOpKinds;
using pagefile::trace::op_name;
using pagefile::trace::OpKind;
using pagefile::trace::TraceOp;

struct Trace {
  // Names the trace in messages: its path, or "<stdin>".
  std::string source;
  // Every file the trace names, in order of first appearance.
  std::vector<std::string> files;
  std::vector<TraceOp> ops;
  // The data file of the writes that carry their bytes (`data PATH`): as
  // written in the trace by parse_trace, resolved against the trace's
  // directory by load_trace. Empty when the trace has none.
  std::string data_path;
  // True when some operation carries a timestamp (@MICROS).
  bool timed = false;
};

// Parses a whole trace. `source` names it in messages. On the first bad line
// returns kInvalidArgument with a message such as
//   "t.trace:17: read: page 'x' is not a number"
// Besides each line's syntax it checks that every read, write, sync, truncate
// and close names a file the trace has opened and not closed since, and that
// no file is opened twice without a close between. Files still open at the
// end are allowed (the replay closes them). An `unlink` names a file that is
// not open; timestamps never go back; a write with an OFFSET comes after a
// `data` line, of which there is one at most.
pagefile::Result<Trace> parse_trace(std::string_view text, std::string_view source);

// Reads and parses the trace at `path`; "-" reads standard input. kNotFound
// or kIOError when the file cannot be read, else as parse_trace.
pagefile::Result<Trace> load_trace(const std::string& path);

}  // namespace pf_replay
