#include "tools/pf_replay/trace.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <unordered_map>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "tools/common/printable.h"

namespace pf_replay {

namespace {

using pagefile::tools::printable;

using pagefile::Result;
using pagefile::Status;

// The words of one line, comment removed. A '#' starts a comment only at the
// start of a word, so "#" inside a name would be kept, but a name cannot
// begin with one.
std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && (line[at] == ' ' || line[at] == '\t')) ++at;
    if (at == line.size() || line[at] == '#') break;
    size_t end = at;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    words.push_back(line.substr(at, end - at));
    at = end;
  }
  return words;
}

// A decimal integer in [low, high]; `what` names it in the error.
Result<int64_t> parse_number(std::string_view word, std::string_view what, int64_t low,
                             int64_t high) {
  int64_t value = 0;
  const char* first = word.data();
  const char* last = word.data() + word.size();
  auto [ptr, ec] = std::from_chars(first, last, value, 10);
  if (ec == std::errc::result_out_of_range) {
    return Status::invalid_argument(
        fmt::format("{} '{}' is out of range [{}, {}]", what, printable(word), low, high));
  }
  if (ec != std::errc() || ptr != last) {
    return Status::invalid_argument(fmt::format("{} '{}' is not a number", what, printable(word)));
  }
  if (value < low || value > high) {
    return Status::invalid_argument(
        fmt::format("{} '{}' is out of range [{}, {}]", what, printable(word), low, high));
  }
  return value;
}

bool looks_numeric(std::string_view word) {
  return !word.empty() && ((word[0] >= '0' && word[0] <= '9') || word[0] == '-' || word[0] == '+');
}

class Parser {
 public:
  explicit Parser(std::string_view source) { trace_.source = std::string(source); }

  Status parse_line(std::string_view line, uint32_t line_number) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string_view> words = split_words(line);
    if (words.empty()) return Status::ok();
    Status s = parse_words(words, line_number);
    if (!s) return s.with_context(fmt::format("{}:{}", trace_.source, line_number));
    return s;
  }

  Trace take() { return std::move(trace_); }

 private:
  struct TraceFile {
    uint32_t index = 0;
    uint32_t opened_at = 0;  // the line of the open in force, 0 when closed
  };

  Status parse_words(std::vector<std::string_view> words, uint32_t line_number) {
    TraceOp op;
    op.line = line_number;
    if (words[0].starts_with('@')) {
      Result<int64_t> micros = parse_number(words[0].substr(1), "timestamp", 0, INT64_MAX);
      if (!micros) return micros.status();
      if (*micros < last_micros_) {
        return Status::invalid_argument(
            fmt::format("timestamp @{} is before the one of an earlier line (@{})", *micros, last_micros_));
      }
      op.micros = last_micros_ = *micros;
      trace_.timed = true;
      words.erase(words.begin());
      if (words.empty()) return Status::invalid_argument("a timestamp without an operation");
    }
    const std::string_view verb = words[0];
    if (verb == "data") return parse_data(words);
    size_t min_args = 1;
    size_t max_args = 1;
    std::string_view usage;
    if (verb == "open") {
      op.kind = OpKind::kOpen;
      max_args = 3;
      usage = "NAME [PAGE_SIZE] [POLICY]";
    } else if (verb == "read") {
      op.kind = OpKind::kRead;
      min_args = max_args = 2;
      usage = "NAME PAGE";
    } else if (verb == "write") {
      op.kind = OpKind::kWrite;
      min_args = 2;
      max_args = 3;
      usage = "NAME PAGE [OFFSET]";
    } else if (verb == "sync" || verb == "close" || verb == "unlink") {
      op.kind = verb == "sync" ? OpKind::kSync : verb == "close" ? OpKind::kClose : OpKind::kUnlink;
      usage = "NAME";
    } else if (verb == "truncate") {
      op.kind = OpKind::kTruncate;
      min_args = max_args = 2;
      usage = "NAME PAGES";
    } else {
      return Status::invalid_argument(
          fmt::format("unknown operation '{}' (expected open, read, write, sync, truncate, "
                      "close, unlink, data or a # comment)",
                      printable(verb)));
    }
    const size_t args = words.size() - 1;
    if (args < min_args || args > max_args) {
      return Status::invalid_argument(
          verb, fmt::format("expected {} {}, got {} argument{}", verb, usage, args,
                            args == 1 ? "" : "s"));
    }

    switch (op.kind) {
      case OpKind::kOpen:
        if (Status s = parse_open_args(words, op); !s) return s.with_context(verb);
        break;
      case OpKind::kRead:
      case OpKind::kWrite: {
        Result<int64_t> page = parse_number(words[2], "page", 0, pagefile::kMaxPageNumber);
        if (!page) return page.status().with_context(verb);
        op.page = *page;
        if (words.size() == 4) {
          if (trace_.data_path.empty()) {
            return Status::invalid_argument(verb, "a write with an OFFSET needs a data line before it");
          }
          Result<int64_t> offset = parse_number(words[3], "offset", 0, INT64_MAX);
          if (!offset) return offset.status().with_context(verb);
          op.data_offset = *offset;
        }
        break;
      }
      case OpKind::kTruncate: {
        Result<int64_t> pages = parse_number(words[2], "pages", 0, pagefile::kMaxPageNumber + 1);
        if (!pages) return pages.status().with_context(verb);
        op.page = *pages;
        break;
      }
      case OpKind::kSync:
      case OpKind::kClose:
      case OpKind::kUnlink:
        break;
    }

    const std::string_view name = words[1];
    if (name.find('\0') != std::string_view::npos) {
      return Status::invalid_argument(verb, fmt::format("file name '{}' contains a NUL byte", printable(name)));
    }
    auto [it, added] = files_.try_emplace(std::string(name));
    if (added) {
      it->second.index = static_cast<uint32_t>(trace_.files.size());
      trace_.files.emplace_back(name);
    }
    TraceFile& file = it->second;
    op.file = file.index;
    if (op.kind == OpKind::kOpen) {
      if (file.opened_at != 0) {
        return Status::invalid_argument(
            verb, fmt::format("file '{}' is already open (opened on line {})", printable(name),
                              file.opened_at));
      }
      file.opened_at = line_number;
    } else if (op.kind == OpKind::kUnlink) {
      if (file.opened_at != 0) {
        return Status::invalid_argument(
            verb, fmt::format("file '{}' is open (opened on line {})", printable(name), file.opened_at));
      }
    } else {
      if (file.opened_at == 0) {
        return Status::invalid_argument(verb, fmt::format("file '{}' is not open", printable(name)));
      }
      if (op.kind == OpKind::kClose) file.opened_at = 0;
    }
    trace_.ops.push_back(op);
    return Status::ok();
  }

  // data PATH: once, before the writes that carry an OFFSET.
  Status parse_data(const std::vector<std::string_view>& words) {
    if (words.size() != 2) {
      return Status::invalid_argument(
          "data", fmt::format("expected data PATH, got {} argument{}", words.size() - 1, words.size() == 2 ? "" : "s"));
    }
    if (!trace_.data_path.empty()) return Status::invalid_argument("data", "a second data line");
    trace_.data_path = std::string(words[1]);
    return Status::ok();
  }

  // open NAME [PAGE_SIZE] [POLICY]: a lone optional word is a page size when
  // it starts like a number, else a policy.
  static Status parse_open_args(const std::vector<std::string_view>& words, TraceOp& op) {
    size_t next = 2;
    if (next < words.size() && (looks_numeric(words[next]) || words.size() == 4)) {
      Result<int64_t> size = parse_number(words[next], "page size", 0, UINT32_MAX);
      if (!size) return size.status();
      op.page_size = static_cast<uint32_t>(*size);
      if (!pagefile::check_page_size(op.page_size)) {
        return Status::invalid_argument(
            fmt::format("page size {} is not a power of two in [{}, {}]", op.page_size,
                        pagefile::kMinPageSize, pagefile::kMaxPageSize));
      }
      ++next;
    }
    if (next < words.size()) {
      Result<pagefile::AccessType> policy = pagefile::parse_access_type(words[next]);
      if (!policy) {
        return Status::invalid_argument(
            fmt::format("policy '{}' is not random, sequential or looping", printable(words[next])));
      }
      op.policy = *policy;
    }
    return Status::ok();
  }

  Trace trace_;
  int64_t last_micros_ = 0;
  std::unordered_map<std::string, TraceFile> files_;
};

}  // namespace

Result<Trace> parse_trace(std::string_view text, std::string_view source) {
  Parser parser(source);
  uint32_t line_number = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    ++line_number;
    if (Status s = parser.parse_line(text.substr(at, end - at), line_number); !s) return s;
    at = end + 1;
  }
  return parser.take();
}

Result<Trace> load_trace(const std::string& path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return Status::io_error("<stdin>", "cannot read the trace");
    return parse_trace(text, "<stdin>");
  }
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const int error = errno;
    if (error == ENOENT) return Status::not_found(path, "no such trace file");
    return Status::io_error(path, std::strerror(error));
  }
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return Status::io_error(path, "error while reading the trace");
  Result<Trace> trace = parse_trace(text, path);
  if (trace && !trace->data_path.empty() && std::filesystem::path(trace->data_path).is_relative()) {
    trace->data_path = (std::filesystem::path(path).parent_path() / trace->data_path).string();
  }
  return trace;
}

}  // namespace pf_replay
