#include "tools/pf_replay/generate.h"

#include <fmt/format.h>

#include "pagefile/options.h"
#include "pagefile/pagefile.h"
#include "tools/pf_replay/split_mix64.h"

namespace pf_replay {

namespace {

using pagefile::Result;
using pagefile::Status;

bool is_trace_word(std::string_view name) {
  if (name.empty() || name[0] == '#') return false;
  for (char c : name) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return false;
  }
  return true;
}

// A page count that only `pattern` takes, given as `flag` (0: not given):
// OK when it is not given, or given for that pattern and in
// [1, file_pages].
Status check_pattern_pages(std::string_view flag, int64_t pages, pagefile::AccessType pattern,
                           const GenerateOptions& options) {
  if (pages == 0) return Status::ok();
  if (options.pattern != pattern) {
    return Status::invalid_argument(
        fmt::format("{} {}", flag, pages),
        fmt::format("applies to the {} pattern only", pagefile::access_type_name(pattern)));
  }
  if (pages < 0 || pages > options.file_pages) {
    return Status::invalid_argument(fmt::format("{} {}", flag, pages),
                                    fmt::format("must be in [1, {}] (--file-pages)",
                                                options.file_pages));
  }
  return Status::ok();
}

}  // namespace

Status check_generate_options(const GenerateOptions& options) {
  if (!is_trace_word(options.file)) {
    return Status::invalid_argument(
        fmt::format("--file '{}'", options.file),
        "must be a non-empty name without spaces or control characters, not starting with #");
  }
  if (options.file_pages < 1 || options.file_pages > pagefile::kMaxPageNumber + 1) {
    return Status::invalid_argument(
        fmt::format("--file-pages {}", options.file_pages),
        fmt::format("must be in [1, {}]", pagefile::kMaxPageNumber + 1));
  }
  if (options.ops < 0) {
    return Status::invalid_argument(fmt::format("--ops {}", options.ops), "must not be negative");
  }
  if (!(options.write_ratio >= 0.0 && options.write_ratio <= 1.0)) {
    return Status::invalid_argument(fmt::format("--write-ratio {}", options.write_ratio),
                                    "must be in [0, 1]");
  }
  if (Status s = pagefile::check_page_size(options.page_size); !s) {
    return Status::invalid_argument(
        fmt::format("--page-size {}", options.page_size),
        fmt::format("must be a power of two in [{}, {}]", pagefile::kMinPageSize,
                    pagefile::kMaxPageSize));
  }
  if (Status s = check_pattern_pages("--loop-pages", options.loop_pages,
                                     pagefile::AccessType::kLooping, options);
      !s) {
    return s;
  }
  if (Status s = check_pattern_pages("--hot-pages", options.hot_pages,
                                     pagefile::AccessType::kRandom, options);
      !s) {
    return s;
  }
  if (!(options.hot_share >= 0.0 && options.hot_share <= 1.0)) {
    return Status::invalid_argument(fmt::format("--hot-share {}", options.hot_share), "must be in [0, 1]");
  }
  return Status::ok();
}

std::string generate_command_line(const GenerateOptions& options) {
  std::string line = fmt::format(
      "pf-replay generate --pattern {} --file {} --file-pages {} --ops {} --write-ratio {} "
      "--page-size {} --seed {}",
      pagefile::access_type_name(options.pattern), options.file, options.file_pages, options.ops,
      options.write_ratio, options.page_size, options.seed);
  if (options.loop_pages != 0) line += fmt::format(" --loop-pages {}", options.loop_pages);
  if (options.hot_pages != 0) {
    line += fmt::format(" --hot-pages {} --hot-share {}", options.hot_pages, options.hot_share);
  }
  return line;
}

Status generate_trace(const GenerateOptions& options,
                      const std::function<void(const TraceOp&)>& emit) {
  if (Status s = check_generate_options(options); !s) return s;

  TraceOp op;
  op.file = 0;
  op.kind = OpKind::kOpen;
  op.page_size = options.page_size;
  op.policy = options.pattern;
  emit(op);
  op.page_size = 0;
  op.policy.reset();

  SplitMix64 random(options.seed);
  const int64_t loop = options.loop_pages != 0 ? options.loop_pages : options.file_pages;
  bool wrote = false;
  for (int64_t i = 0; i < options.ops; ++i) {
    // The write draw comes first for every pattern, so a trace's reads and
    // writes fall on the same op numbers whatever its pattern.
    const bool write = random.next_unit() < options.write_ratio;
    switch (options.pattern) {
      case pagefile::AccessType::kSequential:
        op.page = i % options.file_pages;
        break;
      case pagefile::AccessType::kLooping:
        op.page = i % loop;
        break;
      case pagefile::AccessType::kRandom: {
        // Without a hot set no draw is added, so uniform traces stay as
        // they always were.
        const bool hot = options.hot_pages != 0 && random.next_unit() < options.hot_share;
        const int64_t range = hot ? options.hot_pages : options.file_pages;
        op.page = static_cast<int64_t>(random.next_below(static_cast<uint64_t>(range)));
        break;
      }
    }
    op.kind = write ? OpKind::kWrite : OpKind::kRead;
    wrote = wrote || write;
    emit(op);
  }

  op.page = 0;
  if (wrote) {
    op.kind = OpKind::kSync;
    emit(op);
  }
  op.kind = OpKind::kClose;
  emit(op);
  return Status::ok();
}

}  // namespace pf_replay
