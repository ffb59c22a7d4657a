// The process's log (spdlog): one line per event, "key=value" fields after
// a few words saying what happened, e.g.
//   2026-11-26T14:40:01.123 warning request refused op=write code=Stale message="..."
// Silent unless the program turns it on: pagefiled logs to stderr (where
// journald picks it up) at --log-level; the VFS logs to the file
// PAGEFILE_LOG names, and nothing by default. Library code just calls
// logger().info(...) and the like.
//
// Thread-safety: thread-safe; turn it on before the threads that log start.
#pragma once

#include <string>

#include <spdlog/spdlog.h>

#include "pagefile/status.h"

namespace pagefile {

spdlog::logger& logger();

// Log to stderr from `level` ("trace", "debug", "info", "warn", "error",
// "critical", "off"). kInvalidArgument for another level.
Status log_to_stderr(const std::string& level);
// Append to `path` from `level`. The file's error when it cannot be opened.
Status log_to_file(const std::string& path, const std::string& level);
// Changes the level of whatever the log goes to (a reload).
Status set_log_level(const std::string& level);

}  // namespace pagefile
