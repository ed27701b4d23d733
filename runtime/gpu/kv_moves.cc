#include "runtime/gpu/kv_moves.h"

namespace kplan::gpu {

std::vector<RowMove> kv_row_moves(int64_t cache_length, std::span<const int32_t> keep) {
  std::vector<RowMove> moves;
  const int64_t n = static_cast<int64_t>(keep.size());
  for (int64_t i = 0; i < n;) {
    const int64_t from = cache_length + keep[static_cast<size_t>(i)], to = cache_length + i;
    int64_t rows = 1;
    // Kept indices increase, so from >= to; a range may grow while it stays consecutive and its
    // source does not reach into its destination (rows <= from - to, unless nothing moves).
    while (i + rows < n && keep[static_cast<size_t>(i + rows)] == keep[static_cast<size_t>(i)] + rows &&
           (from == to || rows < from - to))
      ++rows;
    if (from != to) moves.push_back({from, to, rows});
    i += rows;
  }
  return moves;
}

}  // namespace kplan::gpu
