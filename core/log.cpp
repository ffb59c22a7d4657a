#include "core/log.h"

#include <memory>

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace pagefile {

namespace {

struct Log {
  std::shared_ptr<spdlog::sinks::dist_sink_mt> sinks = std::make_shared<spdlog::sinks::dist_sink_mt>();
  spdlog::logger logger{"pagefile", sinks};
  Log() {
    logger.set_level(spdlog::level::off);
    logger.set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
    logger.flush_on(spdlog::level::info);
  }
};

Log& the_log() {
  static Log* log = new Log;  // never destroyed: threads may log during exit
  return *log;
}

Result<spdlog::level::level_enum> level_of(const std::string& name) {
  for (auto level : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info, spdlog::level::warn,
                     spdlog::level::err, spdlog::level::critical, spdlog::level::off}) {
    auto text = spdlog::level::to_string_view(level);
    // (spdlog spells one "warning": the name --help gives is taken too.)
    if (name == std::string_view(text.data(), text.size()) || (level == spdlog::level::err && name == "error") ||
        (level == spdlog::level::warn && name == "warn")) {
      return level;
    }
  }
  return Status::invalid_argument(fmt::format("log level '{}'", name),
                                  "is none of trace, debug, info, warn, error, critical, off");
}

}  // namespace

spdlog::logger& logger() { return the_log().logger; }

Status log_to_stderr(const std::string& level) {
  auto l = level_of(level);
  if (!l) return l.status();
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  the_log().sinks->add_sink(sink);
  the_log().logger.set_level(*l);
  return Status::ok();
}

Status set_log_level(const std::string& level) {
  auto l = level_of(level);
  if (!l) return l.status();
  the_log().logger.set_level(*l);
  return Status::ok();
}

Status log_to_file(const std::string& path, const std::string& level) {
  auto l = level_of(level);
  if (!l) return l.status();
  try {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
    sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e %P %l %v");
    the_log().sinks->add_sink(sink);
  } catch (const spdlog::spdlog_ex& e) {
    return Status::io_error(path, e.what());
  }
  the_log().logger.set_level(*l);
  return Status::ok();
}

}  // namespace pagefile
