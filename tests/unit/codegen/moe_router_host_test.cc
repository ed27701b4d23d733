// kernels_templates/moe_router.cuh run on the host (cuda_host_shim.h: a fiber per CUDA thread),
// so CI checks the router's own code without a GPU: the chosen experts (in order) and their
// weights against the CPU op (runtime/cpu/moe.h) for K2.6's plain top-8 of 384, a
// group-limited router (DeepSeek-V3's 8 groups, 4 kept) and a small one, tokens over several
// blocks. The device runs the same source through NVRTC (GpuOps.MoeRouterPlainAndGroupLimited).
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kplan::codegen
