// Logging set-up: one spdlog logger on stderr, "[time] [level] message".
#pragma once

#include <spdlog/spdlog.h>

#include <functional>

namespace lm::util {

/// Configures the default spdlog logger: stderr, pattern with time and level; `verbose` enables debug.
void setup_logging(bool verbose);

/// A rank of a multi-process run: every line names the rank; ranks other than 0 log warnings and errors
/// only (unless debug logging is on), so the log reads like one process's.
void set_log_rank(int rank);

/// Runs `fn` before each log line is written (e.g. to erase a live progress line first); nullptr removes
/// it. One hook at a time.
void set_before_log(std::function<void()> fn);

}  // namespace lm::util
