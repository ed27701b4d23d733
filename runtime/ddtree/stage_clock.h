#pragma once
// Seconds on a monotonic clock, for the decode loops' per-stage timings.
#include <chrono>

namespace kplan {

inline double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kplan
