#include "tests/tools/run_program.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <doctest/doctest.h>

#include "tests/support/eventually.h"

extern char** environ;

namespace pagefile::test {

std::string binary_from_env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE_MESSAGE(value != nullptr, name << " must name the binary (meson test sets it)");
  // Absolute, since the child changes directory before exec.
  return std::filesystem::absolute(value).string();
}

Outcome pf_replay(const std::filesystem::path& dir, const std::vector<std::string>& args,
                  const EnvVars& env) {
  return run_program(binary_from_env("PF_REPLAY"), dir, args, env);
}

Outcome pagefile_admin(const std::filesystem::path& dir, const std::vector<std::string>& args,
                       const EnvVars& env) {
  return run_program(binary_from_env("PAGEFILE_ADMIN"), dir, args, env);
}

void generate_trace(const std::filesystem::path& dir, const std::string& name,
                    std::vector<std::string> args) {
  args.insert(args.begin(), "generate");
  Outcome outcome = pf_replay(dir, args);
  INFO(outcome.err);
  REQUIRE(outcome.exit_status == 0);
  write_file(dir / name, outcome.out);
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool wait_for_text(const std::filesystem::path& path, const std::string& text, std::chrono::milliseconds limit) {
  return eventually([&] { return read_file(path).find(text) != std::string::npos; }, limit);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1) {
    parts.push_back(text.substr(start, at - start));
  }
  parts.push_back(text.substr(start));
  return parts;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> parts = split(text, '\n');
  if (parts.back().empty()) parts.pop_back();
  return parts;
}

Outcome run_program(const std::string& binary, const std::filesystem::path& dir,
                    const std::vector<std::string>& args, const EnvVars& env) {
  const std::string out_path = (dir / "stdout.txt").string();
  const std::string err_path = (dir / "stderr.txt").string();
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);

  // The environment is built before fork: between fork and exec only
  // async-signal-safe calls are allowed.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    bool overridden = false;
    for (const auto& [name, value] : env) {
      if (entry.starts_with(name + "=")) overridden = true;
    }
    if (!overridden) env_storage.emplace_back(entry);
  }
  for (const auto& [name, value] : env) env_storage.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0 || ::chdir(dir.c_str()) != 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  Outcome outcome;
  outcome.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  outcome.out = read_file(out_path);
  outcome.err = read_file(err_path);
  REQUIRE_MESSAGE(outcome.exit_status != 126, "could not set up the child in " << dir);
  REQUIRE_MESSAGE(outcome.exit_status != 127, "could not run " << binary);
  return outcome;
}

std::vector<CsvRow> csv_rows(const std::filesystem::path& path) {
  const std::vector<std::string> text = lines(read_file(path));
  REQUIRE(!text.empty());
  const std::vector<std::string> header = split(text[0], ',');
  std::vector<CsvRow> rows;
  for (size_t i = 1; i < text.size(); ++i) {
    const std::vector<std::string> fields = split(text[i], ',');
    INFO(text[i]);
    REQUIRE(fields.size() == header.size());
    CsvRow& row = rows.emplace_back();
    for (size_t k = 0; k < header.size(); ++k) row[header[k]] = fields[k];
  }
  return rows;
}

}  // namespace pagefile::test
