#include "tools/common/config_file.h"

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace pagefile::tools {

namespace {

// One TOML value as a flag's text; false when it is not a scalar.
bool scalar_text(const toml::node& node, std::string& out) {
  if (auto s = node.as_string()) {
    out = s->get();
  } else if (auto i = node.as_integer()) {
    out = std::to_string(i->get());
  } else if (auto f = node.as_floating_point()) {
    out = fmt::format("{}", f->get());
  } else if (auto b = node.as_boolean()) {
    out = b->get() ? "true" : "false";
  } else {
    return false;
  }
  return true;
}

}  // namespace

Result<ConfigArgs> read_config(const CLI::App& app, const std::filesystem::path& file) {
  toml::table table;
  try {
    table = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    if (where.line == 0) return Status::not_found(file.string(), std::string(e.description()));
    return Status::invalid_argument(fmt::format("{}:{}:{}", file.string(), where.line, where.column),
                                    std::string(e.description()));
  }
  ConfigArgs out;
  for (const auto& [toml_key, node] : table) {
    const std::string key(toml_key.str());
    const std::string flag = "--" + key;
    const int64_t line = node.source().begin.line;
    auto at = [&] { return fmt::format("{}:{}: {}", file.string(), line, key); };
    if (node.is_table()) {
      return Status::invalid_argument(at(), "is a table; the settings are keys at the top of the file");
    }
    const CLI::Option* option = app.get_option_no_throw(flag);
    if (option == nullptr || key == "config" || key == "help") {
      return Status::invalid_argument(at(), "is no setting (the keys are the long flags without dashes; see --help)");
    }
    out.lines[flag] = line;
    std::vector<const toml::node*> values;
    if (auto array = node.as_array()) {
      for (const auto& v : *array) values.push_back(&v);
    } else {
      values.push_back(&node);
    }
    for (const toml::node* v : values) {
      std::string text;
      if (!scalar_text(*v, text)) {
        return Status::invalid_argument(at(), "must be a string, a number, true or false (or an array of them)");
      }
      if (option->get_items_expected_max() == 0) {  // a flag: true sets it, false leaves it off
        if (!v->is_boolean()) return Status::invalid_argument(at(), "is a flag: true or false");
        if (text == "true") out.args.push_back(flag);
        continue;
      }
      out.args.push_back(flag);
      out.args.push_back(text);
    }
  }
  return out;
}

int parse_with_config(CLI::App& app, int argc, char** argv, std::string* config_out) {
  const std::string program = std::filesystem::path(argv[0]).filename().string();
  std::string config;
  std::vector<std::string> given;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--config" && i + 1 < argc) {
      config = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      config = arg.substr(9);
    } else {
      given.push_back(arg);
    }
  }
  if (config_out != nullptr) *config_out = config;
  ConfigArgs from_file;
  if (!config.empty()) {
    auto read = read_config(app, config);
    if (!read) {
      fmt::print(stderr, "{}: --config: {}\n", program, read.status().to_string());
      return 2;
    }
    from_file = std::move(*read);
  }
  std::vector<std::string> args = from_file.args;
  args.insert(args.end(), given.begin(), given.end());
  std::reverse(args.begin(), args.end());  // (CLI11 takes them last first)
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    // A bad value from the file: say where it is.
    std::string message = e.what();
    for (const auto& [flag, line] : from_file.lines) {
      bool on_command_line = std::find(given.begin(), given.end(), flag) != given.end();
      if (!on_command_line && message.find(flag) != std::string::npos) {
        fmt::print(stderr, "{}: --config: {}:{}: {}: {}\n", program, config, line, flag.substr(2), message);
        return 2;
      }
    }
    return app.exit(e);
  }
  return -1;
}

}  // namespace pagefile::tools
