// The kernel-free KV commit: kv_row_moves' ranges, applied in order as plain copies (each
// memcpy-safe: source and destination never overlap), compact the pending rows exactly.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/gpu/kv_moves.h"

namespace kplan::gpu {
namespace {

// Applies the moves to rows holding their own index and returns the first rows after the commit.
std::vector<int64_t> apply(int64_t cache_length, const std::vector<int32_t>& keep, size_t* copies) {
  std::vector<int64_t> rows(64);
  std::iota(rows.begin(), rows.end(), 0);
  const std::vector<RowMove> moves = kv_row_moves(cache_length, keep);
  *copies = moves.size();
  for (const RowMove& m : moves) {
    EXPECT_TRUE(m.from >= m.to + m.rows || m.from + m.rows <= m.to) << "overlapping copy";
    std::copy(rows.begin() + m.from, rows.begin() + m.from + m.rows, rows.begin() + m.to);
  }
  return std::vector<int64_t>(rows.begin() + cache_length, rows.begin() + cache_length + static_cast<int64_t>(keep.size()));
}

TEST(KvMoves, CompactsTheKeptRowsInFewCopies) {
  size_t copies = 0;
  EXPECT_EQ(apply(10, {0, 1, 2, 3}, &copies), (std::vector<int64_t>{10, 11, 12, 13}));
  EXPECT_EQ(copies, 0u) << "a prefix kept in place moves nothing";
  EXPECT_EQ(apply(10, {0, 3, 7}, &copies), (std::vector<int64_t>{10, 13, 17}));
  EXPECT_EQ(copies, 2u);
  EXPECT_EQ(apply(5, {0, 1, 4, 5, 6, 7, 8, 9}, &copies), (std::vector<int64_t>{5, 6, 9, 10, 11, 12, 13, 14}));
  EXPECT_EQ(copies, 3u) << "a run of 6 shifted by 2 splits into non-overlapping copies";
  EXPECT_EQ(apply(0, {20, 21, 22, 23, 24}, &copies), (std::vector<int64_t>{20, 21, 22, 23, 24}));
  EXPECT_EQ(copies, 1u) << "a run far from its destination moves as one copy";
}

}  // namespace
}  // namespace kplan::gpu
