// Wall-clock timing for log lines and tokens/s: one steady clock and the seconds since a point on it.
#pragma once

#include <chrono>

namespace lm::util {

using Clock = std::chrono::steady_clock;

/// Seconds elapsed since `t0`.
inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace lm::util
