#pragma once
// `kplan soak`'s verdict on a series of memory samples: memory is flat when the last sample has
// grown past the first (taken after a warm-up, when caches and pools exist) by no more than a
// tolerance — a leak of a few KiB per call over a thousand calls shows, allocator noise does not.
#include <cstdint>
#include <string>
#include <vector>

namespace kplan::cli {

struct MemorySeries {
  std::string what;                // "host RSS", "device memory"
  std::vector<uint64_t> bytes;     // one sample per checkpoint, in order
};

struct Growth {
  uint64_t first = 0, last = 0, peak = 0;
  int64_t grown = 0;    // last - first
  bool flat = true;     // grown <= tolerance
};

// The growth over `series` (warm-up samples already dropped); tolerance in bytes.
inline Growth growth_of(const MemorySeries& series, uint64_t tolerance) {
  Growth g;
  if (series.bytes.empty()) return g;
  g.first = series.bytes.front();
  g.last = series.bytes.back();
  for (uint64_t b : series.bytes) g.peak = b > g.peak ? b : g.peak;
  g.grown = static_cast<int64_t>(g.last) - static_cast<int64_t>(g.first);
  g.flat = g.grown <= static_cast<int64_t>(tolerance);
  return g;
}

}  // namespace kplan::cli
