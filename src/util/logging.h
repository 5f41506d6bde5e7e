// Logging set-up: one spdlog logger on stderr, "[time] [level] message".
#pragma once

#include <spdlog/spdlog.h>

namespace lm::util {

/// Configures the default spdlog logger: stderr, pattern with time and level; `verbose` enables debug.
void setup_logging(bool verbose);

}  // namespace lm::util
