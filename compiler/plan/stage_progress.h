#pragma once
// What the long steps of writing a plan report (compiling kernels, checksumming and writing the
// weights), for the CLI to draw (tools/kplan/phase.h): each step begins with its name and unit,
// advances with its own counters (kernels compiled, bytes hashed, bytes written) and ends. Any
// member may be empty.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace kplan::plan {

struct StageProgress {
  // A step begins: what it does, and what it counts (bytes, else items called `items`).
  std::function<void(const std::string& what, bool bytes, const std::string& items)> begin{};
  std::function<void(uint64_t done, uint64_t total)> advance{};
  std::function<void()> end{};
};

// compile_kernels' per-kernel line "codegen: [3/40] <id> (0.21 s)" to 3 and 40; false for any
// other line (its summary).
inline bool parse_kernel_progress(const std::string& line, uint64_t* done, uint64_t* total) {
  unsigned long long d = 0, t = 0;
  char close = 0;
  if (std::sscanf(line.c_str(), "codegen: [%llu/%llu%c", &d, &t, &close) != 3 || close != ']' || t == 0 || d > t)
    return false;
  *done = d;
  *total = t;
  return true;
}

}  // namespace kplan::plan
