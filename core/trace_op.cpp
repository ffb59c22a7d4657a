#include "core/trace_op.h"

#include <iterator>

#include <fmt/format.h>

namespace pagefile::trace {

std::string_view op_name(OpKind kind) {
  switch (kind) {
    case OpKind::kOpen: return "open";
    case OpKind::kRead: return "read";
    case OpKind::kWrite: return "write";
    case OpKind::kSync: return "sync";
    case OpKind::kTruncate: return "truncate";
    case OpKind::kClose: return "close";
    case OpKind::kUnlink: return "unlink";
  }
  return "unknown";
}

void append_op(std::string& out, const TraceOp& op, std::string_view file_name) {
  auto to = std::back_inserter(out);
  if (op.micros >= 0) fmt::format_to(to, "@{} ", op.micros);
  fmt::format_to(to, "{} {}", op_name(op.kind), file_name);
  switch (op.kind) {
    case OpKind::kOpen:
      if (op.page_size != 0) fmt::format_to(to, " {}", op.page_size);
      if (op.policy) fmt::format_to(to, " {}", access_type_name(*op.policy));
      break;
    case OpKind::kWrite:
      fmt::format_to(to, " {}", op.page);
      if (op.data_offset >= 0) fmt::format_to(to, " {}", op.data_offset);
      break;
    case OpKind::kRead:
    case OpKind::kTruncate:
      fmt::format_to(to, " {}", op.page);
      break;
    case OpKind::kSync:
    case OpKind::kClose:
    case OpKind::kUnlink:
      break;
  }
  out += '\n';
}

std::string format_op(const TraceOp& op, std::string_view file_name) {
  std::string line;
  append_op(line, op, file_name);
  line.pop_back();
  return line;
}

}  // namespace pagefile::trace
