// Runs a built tool (pf-replay, pagefile) as a user would: a subprocess in a
// given directory, with extra environment variables, its output captured.
// The binaries' paths come from environment variables that
// tests/tools/meson.build sets (PF_REPLAY, PAGEFILE_ADMIN, PAGEFILED).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pagefile::test {

struct Outcome {
  int exit_status = -1;  // 128 + signal when it was killed
  std::string out;
  std::string err;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// The value of the environment variable `name`; REQUIREs that it is set.
std::string binary_from_env(const char* name);

// Runs `binary` with `args` in `dir`, standard input from /dev/null, and
// the environment of the test plus `env` (which overrides). Output goes
// through files in `dir` (stdout.txt, stderr.txt) rather than pipes, so no
// amount of it can block the child. REQUIREs that the child could be run.
Outcome run_program(const std::string& binary, const std::filesystem::path& dir,
                    const std::vector<std::string>& args, const EnvVars& env = {});

// The built tools, each with `args` in `dir` as run_program runs them:
// pf-replay ($PF_REPLAY) and the admin CLI pagefile ($PAGEFILE_ADMIN).
Outcome pf_replay(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  const EnvVars& env = {});
Outcome pagefile_admin(const std::filesystem::path& dir, const std::vector<std::string>& args,
                       const EnvVars& env = {});

// `pf-replay generate ARGS > dir/name`; REQUIREs that it succeeds.
void generate_trace(const std::filesystem::path& dir, const std::string& name,
                    std::vector<std::string> args);

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);
// Waits until the file `path` holds `text` (a process's output or log), at
// most `limit` (tests/support/eventually.h).
bool wait_for_text(const std::filesystem::path& path, const std::string& text,
                   std::chrono::milliseconds limit = std::chrono::seconds(30));
// The parts of `text` between separators, empty ones included: "a,,b," is
// a, "", b, "". No quoting: CSV fields with commas are not kept together.
std::vector<std::string> split(const std::string& text, char separator);
// The lines of `text`; a final newline ends the last line.
std::vector<std::string> lines(const std::string& text);

// A CSV row by its header's column names; `row.at(name)` fails a test on a
// column that is missing.
using CsvRow = std::map<std::string, std::string>;
// The rows after the header of the CSV file at `path` (as pf-replay writes
// them: no quoting); REQUIREs that every row has the header's number of
// fields.
std::vector<CsvRow> csv_rows(const std::filesystem::path& path);

}  // namespace pagefile::test
