// A tool's flags from a TOML file (toml++): `--config FILE` holds any of the
// tool's long flags, each key named as the flag without its dashes
// (`listen = "tcp://127.0.0.1:7001"`, `cache-pages = 4096`, `insecure =
// true`, an array for a flag given several times). The file's flags come
// first and the command line's after them, so the command line wins.
//
// What the file may hold is exactly what the command line may: an unknown
// key, a table, a value of the wrong type, or a TOML syntax error stops the
// start with the file, line and key named.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "pagefile/status.h"

namespace pagefile::tools {

struct ConfigArgs {
  std::vector<std::string> args;          // "--key", "value", ... in file order
  std::map<std::string, int64_t> lines;   // "--key" -> its line in the file
};

// The arguments `file` stands for, checked against `app`'s options (which
// must be added already). kInvalidArgument naming file:line and key for
// anything `app` would not take; kNotFound when the file cannot be read.
Result<ConfigArgs> read_config(const CLI::App& app, const std::filesystem::path& file);

// Parses argv[1..] after the arguments of `--config FILE` (or
// `--config=FILE`), when argv names one, with `app`, whose single-valued
// options must take the last value given (so the command line overrides).
// Returns the exit status to leave with (CLI11's for --help and parse
// errors, 2 for a bad config file, which it prints), or -1 to go on.
// `config`, when given, gets the file's path ("" for none).
int parse_with_config(CLI::App& app, int argc, char** argv, std::string* config = nullptr);

}  // namespace pagefile::tools
