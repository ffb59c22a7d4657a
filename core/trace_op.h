// One operation of a trace: the unit of pf-replay's input and of what the
// SQLite VFS captures (doc/trace_format.md is the reference). This is the
// format's record and its printing; the parser, which checks a whole trace,
// is pf-replay's (tools/pf_replay/trace.h).
//
//   [@MICROS] open NAME [PAGE_SIZE] [POLICY]
//   [@MICROS] read NAME PAGE
//   [@MICROS] write NAME PAGE [OFFSET]     OFFSET: the page's bytes in the data file
//   [@MICROS] sync NAME
//   [@MICROS] truncate NAME PAGES
//   [@MICROS] close NAME
//   [@MICROS] unlink NAME
//   data PATH                              the data file of the writes with an OFFSET
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pagefile/options.h"

namespace pagefile::trace {

enum class OpKind : uint8_t { kOpen, kRead, kWrite, kSync, kTruncate, kClose, kUnlink };
inline constexpr int kOpKinds = 7;

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
  std::optional<AccessType> policy;
  // write: where the page's bytes start in the trace's data file; -1 for a
  // write of a page stamp (a generated trace).
  int64_t data_offset = -1;
  // When the operation was issued, in microseconds since the trace began;
  // -1 when the trace does not say.
  int64_t micros = -1;
};

// The line (without newline) that parses back to `op` on a file named
// `file_name`.
std::string format_op(const TraceOp& op, std::string_view file_name);
// Appends that line and a newline to `out` (no allocation of its own: the
// VFS's capture formats one per page operation).
void append_op(std::string& out, const TraceOp& op, std::string_view file_name);

}  // namespace pagefile::trace
