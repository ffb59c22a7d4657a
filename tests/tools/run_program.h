// Runs a built tool (pf-replay, pagefile) as a user would: a subprocess in a
// given directory, with extra environment variables, its output captured.
// The binaries' paths come from environment variables that
// tests/tools/meson.build sets (PF_REPLAY, PAGEFILE_ADMIN, PAGEFILED).
#pragma once

#include <filesystem>
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

std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);
// The parts of `text` between separators, empty ones included: "a,,b," is
// a, "", b, "". No quoting: CSV fields with commas are not kept together.
std::vector<std::string> split(const std::string& text, char separator);
// The lines of `text`; a final newline ends the last line.
std::vector<std::string> lines(const std::string& text);

}  // namespace pagefile::test
