// The host shim's execution model (cuda_host_shim.h over host_fibers.h): a block's threads are
// fibers that meet at __syncthreads and the warp collectives, blocks run one after another, and a
// barrier only some threads reach stops the binary with a message instead of hanging.
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/codegen/cuda_host_shim.h"

namespace {

namespace h = kplan::cuda_host;

// Each thread writes its slot, the block meets, each reads its neighbour's; a warp sums its
// lanes by shuffles; every phase runs several times so a barrier passed early would read a
// slot of the phase before.
TEST(CudaHostShim, BarriersOrderEveryThreadsWritesAcrossBlocks) {
  constexpr unsigned kThreads = 256, kPhases = 5;
  const unsigned grid_x = 3, grid_y = 2;
  std::vector<unsigned> out(grid_x * grid_y * kThreads * kPhases), sums(grid_x * grid_y * (kThreads / 32) * kPhases);
  h::launch(grid_x, grid_y, kThreads, [&] {
    __shared__ unsigned slot[kThreads];
    const unsigned t = threadIdx.x, block = blockIdx.y * grid_x + blockIdx.x;
    for (unsigned p = 0; p < kPhases; ++p) {
      slot[t] = 1000 * p + t + 7 * block;
      __syncthreads();
      out[(block * kThreads + t) * kPhases + p] = slot[(t + 1) % kThreads];
      __syncthreads();  // nobody rewrites a slot before its reader has read it
      unsigned v = t + p;
      for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
      if (t % 32 == 0) sums[(block * (kThreads / 32) + t / 32) * kPhases + p] = v;
    }
  });
  for (unsigned b = 0; b < grid_x * grid_y; ++b)
    for (unsigned t = 0; t < kThreads; ++t)
      for (unsigned p = 0; p < kPhases; ++p) {
        ASSERT_EQ(out[(b * kThreads + t) * kPhases + p], 1000 * p + (t + 1) % kThreads + 7 * b) << "block " << b << " thread " << t;
        if (t % 32 == 0) {
          unsigned want = 0;
          for (unsigned l = t; l < t + 32; ++l) want += l + p;
          ASSERT_EQ(sums[(b * (kThreads / 32) + t / 32) * kPhases + p], want);
        }
      }
}

// A barrier inside a branch only some threads take: CUDA's behaviour is undefined (a hang on
// most GPUs); the shim names the block and stops.
TEST(CudaHostShimDeathTest, ABarrierOnlySomeThreadsReachStopsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(h::launch(2, 1, 64,
                         [] {
                           if (blockIdx.x == 1 && threadIdx.x < 32) __syncthreads();
                         }),
               "block \\(1, 0, 0\\) deadlocked: 32 threads wait");
}

}  // namespace
