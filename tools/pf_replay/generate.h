// Synthetic traces: the access patterns of the Pagefile paper's experiments
// (section 5) over one file.
//
//   sequential  pages 0, 1, ..., P-1, 0, 1, ...: one scan that wraps around
//               the file; opens the file with the sequential policy.
//   looping     the first L pages (L = loop_pages, the whole file by
//               default) again and again: 0..L-1, 0..L-1, ...; opens the
//               file with the looping policy, whose buffering keeps a loop
//               that fits.
//   random      pages drawn uniformly from [0, P), or with a hot set
//               (hot_pages, hot_share) mostly from [0, H); random policy.
//
// Each operation is a write with probability write_ratio, else a read, so
// 1 writes every page it touches (sequential with ops = P fills the file)
// and 0 only reads. The trace opens the file with the page size and the
// pattern's policy, and ends with a sync when it wrote anything, then a
// close.
//
// Generation is deterministic: the same options and seed give the same
// trace on every machine and build (the generator is SplitMix64 and the
// draws are made without the standard library's distributions, whose
// results differ between implementations).
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "pagefile/options.h"
#include "pagefile/status.h"
#include "tools/pf_replay/trace.h"

namespace pf_replay {

inline constexpr uint64_t kDefaultSeed = 20240229;
inline constexpr uint32_t kDefaultGeneratePageSize = 8192;

struct GenerateOptions {
  // The access pattern, named like the buffer policy it asks for
  // (pagefile::access_type_name): its ops open the file with that policy.
  pagefile::AccessType pattern = pagefile::AccessType::kRandom;
  std::string file;
  int64_t file_pages = 0;
  int64_t ops = 0;
  double write_ratio = 0.0;
  uint32_t page_size = kDefaultGeneratePageSize;
  uint64_t seed = kDefaultSeed;
  // looping only: pages in one loop; 0 means file_pages.
  int64_t loop_pages = 0;
  // random only: a hot set. With hot_pages H > 0, a share hot_share of the
  // ops draw their page from [0, H) and the rest from the whole file, the
  // skew of a database's index roots and busy rows. 0: uniform.
  int64_t hot_pages = 0;
  double hot_share = 0.9;
};

// OK when the options describe a trace; else kInvalidArgument naming the
// option and the rule it breaks.
pagefile::Status check_generate_options(const GenerateOptions& options);

// The command line that generates this trace, for the trace's first comment
// (so that a trace file says how to make it again).
std::string generate_command_line(const GenerateOptions& options);

// Calls `emit` with each operation of the trace in order (every op names
// file 0, the file `options.file`). Errors as check_generate_options; then
// nothing is emitted.
pagefile::Status generate_trace(const GenerateOptions& options,
                                const std::function<void(const TraceOp&)>& emit);

}  // namespace pf_replay
