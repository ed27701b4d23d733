#pragma once
// The KV commit without a kernel: keeping pending rows L + keep[i] -> L + i as a few row-range
// copies. Consecutive kept indices move together as one range, and a range is split where its
// source and destination would overlap, so the copies may run in order as plain
// device-to-device memcpys (each reads rows no earlier copy has written). A prefill or AR commit
// (keep = 0, 1, ...) needs no copy at all.
#include <cstdint>
#include <span>
#include <vector>

namespace kplan::gpu {

struct RowMove {
  int64_t from = 0, to = 0, rows = 0;  // rows [from, from + rows) -> [to, to + rows)
};

// `keep` must be increasing and non-negative (checked by the caller).
std::vector<RowMove> kv_row_moves(int64_t cache_length, std::span<const int32_t> keep);

}  // namespace kplan::gpu
