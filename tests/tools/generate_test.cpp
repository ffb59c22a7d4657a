// The trace generator: determinism, write ratios, and the three patterns.
#include "tools/pf_replay/generate.h"

#include <set>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace pf_replay {
namespace {

using pagefile::AccessType;
using pagefile::Code;

std::vector<TraceOp> generate(const GenerateOptions& options) {
  std::vector<TraceOp> ops;
  REQUIRE_OK(generate_trace(options, [&](const TraceOp& op) { ops.push_back(op); }));
  return ops;
}

std::string text_of(const GenerateOptions& options) {
  std::string text = "# " + generate_command_line(options) + "\n";
  for (const TraceOp& op : generate(options)) text += format_op(op, options.file) + "\n";
  return text;
}

// A trace of `ops` operations over the file "data".
GenerateOptions options_for(AccessType pattern, int64_t file_pages, int64_t ops,
                            double write_ratio) {
  GenerateOptions options;
  options.pattern = pattern;
  options.file = "data";
  options.file_pages = file_pages;
  options.ops = ops;
  options.write_ratio = write_ratio;
  return options;
}

GenerateOptions random_options() { return options_for(AccessType::kRandom, 100, 1000, 0.3); }

// The read and write ops between the open and the closing sync/close.
std::vector<TraceOp> page_ops(const std::vector<TraceOp>& ops) {
  std::vector<TraceOp> out;
  for (const TraceOp& op : ops) {
    if (op.kind == OpKind::kRead || op.kind == OpKind::kWrite) out.push_back(op);
  }
  return out;
}

TEST_CASE("the same options and seed give the same trace; another seed another") {
  GenerateOptions options = random_options();
  const std::string first = text_of(options);
  CHECK(first == text_of(options));
  options.seed += 1;
  CHECK(first != text_of(options));
}

TEST_CASE("the output parses and opens the file with its page size and policy") {
  for (AccessType pattern :
       {AccessType::kRandom, AccessType::kSequential, AccessType::kLooping}) {
    CAPTURE(pagefile::access_type_name(pattern));
    GenerateOptions options = random_options();
    options.pattern = pattern;
    options.page_size = 4096;
    pagefile::Result<Trace> trace = parse_trace(text_of(options), "generated");
    REQUIRE_OK(trace);
    REQUIRE(trace->files == std::vector<std::string>{"data"});
    REQUIRE(trace->ops.size() == 1000 + 3);
    const TraceOp& open = trace->ops.front();
    CHECK(open.kind == OpKind::kOpen);
    CHECK(open.page_size == 4096);
    CHECK(open.policy == pattern);
    CHECK(trace->ops[trace->ops.size() - 2].kind == OpKind::kSync);
    CHECK(trace->ops.back().kind == OpKind::kClose);
  }
}

TEST_CASE("write ratio 1 writes every page it touches; sequential ops=P fills the file") {
  GenerateOptions options = options_for(AccessType::kSequential, 2048, 2048, 1.0);
  std::vector<TraceOp> ops = page_ops(generate(options));
  REQUIRE(ops.size() == 2048);
  for (size_t i = 0; i < ops.size(); ++i) {
    CHECK(ops[i].kind == OpKind::kWrite);
    CHECK(ops[i].page == static_cast<int64_t>(i));
  }
}

TEST_CASE("write ratio 0 only reads and ends without a sync") {
  GenerateOptions options = random_options();
  options.write_ratio = 0.0;
  std::vector<TraceOp> ops = generate(options);
  for (const TraceOp& op : page_ops(ops)) CHECK(op.kind == OpKind::kRead);
  REQUIRE(ops.size() == 1000 + 2);
  CHECK(ops.back().kind == OpKind::kClose);
  CHECK(ops[ops.size() - 2].kind == OpKind::kRead);
}

TEST_CASE("a write ratio between 0 and 1 gives about that share of writes") {
  GenerateOptions options = random_options();
  options.ops = 10000;
  int64_t writes = 0;
  for (const TraceOp& op : page_ops(generate(options))) writes += op.kind == OpKind::kWrite;
  // 0.3 of 10000 has a standard deviation of about 46.
  CHECK(writes > 2800);
  CHECK(writes < 3200);
}

TEST_CASE("random pages are uniform in [0, P)") {
  GenerateOptions options = random_options();
  options.file_pages = 10;
  options.ops = 10000;
  std::vector<int64_t> counts(10);
  for (const TraceOp& op : page_ops(generate(options))) {
    REQUIRE(op.page >= 0);
    REQUIRE(op.page < 10);
    ++counts[static_cast<size_t>(op.page)];
  }
  for (int64_t count : counts) {
    CHECK(count > 850);   // expected 1000, standard deviation 30
    CHECK(count < 1150);
  }
}

TEST_CASE("a hot set takes its share of random pages; without one the trace is unchanged") {
  GenerateOptions options = random_options();
  options.file_pages = 1000;
  options.ops = 20000;
  const std::string uniform = text_of(options);
  options.hot_pages = 10;
  options.hot_share = 0.9;
  int64_t hot = 0;
  int64_t beyond = 0;
  for (const TraceOp& op : page_ops(generate(options))) {
    REQUIRE(op.page >= 0);
    REQUIRE(op.page < 1000);
    if (op.page < 10) ++hot;
    if (op.page >= 500) ++beyond;
  }
  // Expected: 0.9 + 0.1 x 10/1000 of 20000 = 18020 (sd about 42), and the
  // cold draws spread over the file: half of 1980 beyond page 500.
  CHECK(hot > 17800);
  CHECK(hot < 18250);
  CHECK(beyond > 850);
  CHECK(beyond < 1130);
  CHECK(text_of(options) == text_of(options));
  CHECK(text_of(options).find("--hot-pages 10 --hot-share 0.9") != std::string::npos);
  options.hot_pages = 0;
  CHECK(text_of(options) == uniform);
}

TEST_CASE("sequential wraps around the file; looping repeats its loop") {
  GenerateOptions options = options_for(AccessType::kSequential, 5, 12, 0.0);
  std::vector<int64_t> pages;
  for (const TraceOp& op : page_ops(generate(options))) pages.push_back(op.page);
  CHECK(pages == std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1});
  CHECK(generate(options).front().policy == AccessType::kSequential);

  options.pattern = AccessType::kLooping;
  options.loop_pages = 3;
  pages.clear();
  for (const TraceOp& op : page_ops(generate(options))) pages.push_back(op.page);
  CHECK(pages == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  CHECK(generate(options).front().policy == AccessType::kLooping);

  options.loop_pages = 0;  // the whole file
  pages.clear();
  for (const TraceOp& op : page_ops(generate(options))) pages.push_back(op.page);
  CHECK(pages == std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1});
}

TEST_CASE("bad options are refused, naming the option") {
  auto message = [](const GenerateOptions& options) {
    pagefile::Status s = check_generate_options(options);
    CHECK(s.code() == Code::kInvalidArgument);
    return s.message();
  };
  GenerateOptions options = random_options();
  options.file = "";
  CHECK(message(options).starts_with("--file ''"));
  options.file = "two words";
  CHECK(message(options).starts_with("--file 'two words'"));
  options.file = "#data";
  CHECK(message(options).starts_with("--file '#data'"));
  options = random_options();
  options.file_pages = 0;
  CHECK(message(options).starts_with("--file-pages 0"));
  options = random_options();
  options.ops = -1;
  CHECK(message(options).starts_with("--ops -1"));
  options = random_options();
  options.write_ratio = 1.5;
  CHECK(message(options).starts_with("--write-ratio 1.5"));
  options = random_options();
  options.page_size = 3000;
  CHECK(message(options).starts_with("--page-size 3000"));
  options = random_options();
  options.loop_pages = 5;
  CHECK(message(options).starts_with("--loop-pages 5"));
  options.pattern = AccessType::kLooping;
  options.loop_pages = 101;
  CHECK(message(options).starts_with("--loop-pages 101"));
  options = random_options();
  options.hot_pages = 101;
  CHECK(message(options).starts_with("--hot-pages 101"));
  options.hot_pages = 5;
  options.hot_share = 1.5;
  CHECK(message(options).starts_with("--hot-share 1.5"));
  options = random_options();
  options.pattern = AccessType::kSequential;
  options.hot_pages = 5;
  CHECK(message(options).starts_with("--hot-pages 5"));

  std::vector<TraceOp> ops;
  options.file = "";
  CHECK_CODE(generate_trace(options, [&](const TraceOp& op) { ops.push_back(op); }),
             Code::kInvalidArgument);
  CHECK(ops.empty());
}

}  // namespace
}  // namespace pf_replay
