// kernels_templates/moe_router.cuh run on the host (cuda_host_shim.h: a fiber per CUDA thread),
// so CI checks the router's own code without a GPU: the chosen experts (in order) and their
// weights against the CPU op (runtime/cpu/moe.h) for K2.6's plain top-8 of 384, a
// group-limited router (DeepSeek-V3's 8 groups, 4 kept) and a small one, tokens over several
// blocks. The device runs the same source through NVRTC (GpuOps.MoeRouterPlainAndGroupLimited).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/moe.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/moe_router.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;

template <int E, int TOPK, int N_GROUP, int TOPK_GROUP, int NORM, int WARPS>
void check(int T, float scaling, uint64_t seed) {
  const std::vector<float> logits = testing_util::xorshift_uniform(static_cast<size_t>(T) * E, seed, 4.f);
  const std::vector<float> bias = testing_util::xorshift_uniform(E, seed + 1, 0.5f);
  std::vector<int32_t> ids(static_cast<size_t>(T) * TOPK, -1);
  std::vector<float> weights(static_cast<size_t>(T) * TOPK, -1.f);
  cuda_host::launch((T + WARPS - 1) / WARPS, 1, 32 * WARPS, [&] {
    kp::moe_router<E, TOPK, N_GROUP, TOPK_GROUP, NORM, WARPS>(logits.data(), bias.data(), ids.data(), weights.data(), T, scaling);
  });
  Matrix l(T, E);
  l.data = logits;
  const cpu::Routing want =
      cpu::moe_route_logits(l, bias, cpu::RouterParams{E, TOPK, N_GROUP, TOPK_GROUP, NORM == 1, scaling});
  const std::string what = "E " + std::to_string(E) + " groups " + std::to_string(N_GROUP) + " tokens " + std::to_string(T);
  EXPECT_EQ(ids, want.experts) << what;
  EXPECT_LT(relative_error(weights, want.weights), 1e-6) << what;
}

TEST(MoeRouterOnHost, ChoosesAndWeighsAsTheCpuOp) {
  check<384, 8, 1, 1, 1, 4>(1, 2.827f, 1);  // K2.6: one token, one warp of a block
  check<384, 8, 1, 1, 1, 4>(6, 2.827f, 2);  // two blocks, the second partly empty
  check<256, 8, 8, 4, 1, 2>(5, 2.5f, 3);    // DeepSeek-V3's group-limited choice
  check<16, 4, 4, 2, 0, 4>(3, 1.5f, 4);     // no normalisation
}

// Ties go to the smaller index, as the CPU op (and torch.topk's order) has them: every logit equal
// (each token's top-8 is experts 0..7), and a row of a few repeated values.
TEST(MoeRouterOnHost, TiesGoToTheSmallerIndex) {
  constexpr int E = 384, TOPK = 8;
  std::vector<float> logits(2 * E, 0.25f), bias(E, 0.f);
  for (int e = 0; e < E; ++e) logits[E + e] = static_cast<float>(e % 5) - 2.f;  // 2.0 at e = 4, 9, 14, ...
  std::vector<int32_t> ids(2 * TOPK, -1);
  std::vector<float> weights(2 * TOPK, -1.f);
  cuda_host::launch(1, 1, 64, [&] { kp::moe_router<E, TOPK, 1, 1, 1, 2>(logits.data(), bias.data(), ids.data(), weights.data(), 2, 1.f); });
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + TOPK), (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + TOPK, ids.end()), (std::vector<int32_t>{4, 9, 14, 19, 24, 29, 34, 39}));
  for (float w : weights) EXPECT_FLOAT_EQ(w, 1.f / TOPK);
}

// warp_argmax_index (two warp reductions on order_key) picks what warp_argmax's shuffles do:
// ties to the smaller index, -0 equal to +0, -inf and negative values ordered, sentinel indices.
TEST(MoeRouterOnHost, WarpArgmaxIndexIsWarpArgmax) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::vector<float>> rows = {
      {-inf},                        // every lane -inf: the smallest index
      {0.f, -0.f, -1.f, -0.5f},      // -0 ties +0
      {-3.f, -2.5f, -2.5f, -7.f},    // negatives, a tie
      {1.f, 2.f, 2.f, 2.f, 0.5f},    // a three-way tie
      {-inf, 1e-30f, -1e-30f, 3.4e38f, -3.4e38f}};
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<int> got(32), want(32);
    cuda_host::launch(1, 1, 32, [&] {
      const int lane = static_cast<int>(threadIdx.x);
      float v = rows[r][static_cast<size_t>(lane) % rows[r].size()];
      int index = lane % 7 == 6 ? 1 << 30 : 40 - lane;  // indices out of lane order, some sentinels
      got[static_cast<size_t>(lane)] = kp::warp_argmax_index(v, index);
      kp::warp_argmax(v, index);
      want[static_cast<size_t>(lane)] = index;
    });
    EXPECT_EQ(got, want) << "row " << r;
  }
}

}  // namespace
}  // namespace kplan::codegen
