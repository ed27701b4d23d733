// kernels_templates/matmul_siblings.cuh run on the host (cuda_host_shim.h: a fiber per CUDA
// thread), so CI checks the sibling launch's own code without a GPU: each sibling against the
// CPU op, and GLU 1 (a gate and up pair's SwiGLU written by the launch, the up rows' output never
// written) with and without a plain sibling, 1 to 9 tokens over token tiles of 1, 2 and 8, K
// split over a block's warps; the rows-as-M tensor-core tiles (MMA 2) the same; YA_F32 (a
// router's f32 logits as the first sibling, bf16 gate and up after it). The device runs the same source through NVRTC (gpu_ops_test.cc's
// GpuOps.MatmulSiblings*).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ir/support/dtype.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/matmul_siblings.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;

// n values in [-scale, scale), rounded to bf16 when `bf16` (weights: the kernel reads bf16 bits).
std::vector<float> uniform(size_t n, uint64_t seed, float scale, bool bf16) {
  std::vector<float> v = testing_util::xorshift_uniform(n, seed, scale);
  if (bf16)
    for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  return v;
}
const auto& bits = testing_util::bf16_bits;
const auto& matmul = testing_util::reference_matmul;

// One launch of the template (GLU 1: W2, W3 a gate and up pair, N may be 0) over T tokens, its
// outputs against the CPU's; unwritten outputs must keep their NaNs.
template <int K, int N, int N2, int N3, int GLU, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA = 0, int XPF = 0>
void check(int T, uint64_t seed) {
  const std::vector<float> x = uniform(static_cast<size_t>(T) * K, seed, 1.f, false);
  const int rows[3] = {N, N2, N3};
  std::vector<std::vector<float>> w;
  std::vector<std::vector<uint16_t>> wb;
  for (int s = 0; s < 3; ++s) {
    w.push_back(uniform(static_cast<size_t>(std::max(rows[s], 1)) * K, seed + 1 + s, 0.2f, true));
    wb.push_back(bits(w[s]));
  }
  std::vector<std::vector<float>> y;
  for (int s = 0; s < 3; ++s) y.emplace_back(static_cast<size_t>(T) * std::max(rows[s], 1), NAN);
  constexpr int GROUPS = WARPS / KSPLIT, ROWS = N + N2 + N3;
  const unsigned row_blocks = (ROWS + RPW * GROUPS - 1) / (RPW * GROUPS);
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, row_blocks, 32 * WARPS, [&] {
    kp::matmul_siblings<K, N, N2, N3, GLU, 0, kp::F32, kp::F32, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, XPF, 0>(
        x.data(), wb[0].data(), wb[1].data(), wb[2].data(), y[0].data(), y[1].data(), y[2].data(), T, K, std::max(N, 1), N2,
        std::max(N3, 1), nullptr, nullptr, 0.f);
  });
  const std::string what = "GLU " + std::to_string(GLU) + " N " + std::to_string(N) + " MMA " + std::to_string(MMA) + " tokens " + std::to_string(T);
  if (N > 0) {
    EXPECT_LT(relative_error(y[0], matmul(x, w[0], T, N, K)), 1e-5) << what;
  }
  if (GLU == 0) {
    EXPECT_LT(relative_error(y[1], matmul(x, w[1], T, N2, K)), 1e-5) << what;
    if (N3 > 0) {
      EXPECT_LT(relative_error(y[2], matmul(x, w[2], T, N3, K)), 1e-5) << what;
    }
    return;
  }
  const std::vector<float> gate = matmul(x, w[1], T, N2, K), up = matmul(x, w[2], T, N3, K);
  std::vector<float> want(gate.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
  EXPECT_LT(relative_error(y[1], want), 1e-5) << what;
  for (float v : y[2]) ASSERT_TRUE(std::isnan(v)) << what << ": the up rows' output written";
}

TEST(MatmulSiblingsOnHost, EachSiblingMatchesTheCpuOp) {
  check<96, 10, 14, 6, 0, 4, 1, 4, 4>(1, 1);
  check<96, 10, 14, 0, 0, 4, 2, 2, 2>(5, 2);
}

// The pair's rows interleave (gate i, up i) in one warp's partial sums: a plain sibling before
// it (N even), none (a dense MLP), several row blocks, K split 1, 2 and 4 ways, token tiles of
// 1, 2 and 8 (ragged: 9 tokens).
TEST(MatmulSiblingsOnHost, GluWritesTheSwigluOfTheGateAndUpPair) {
  check<96, 10, 14, 14, 1, 4, 1, 4, 4>(1, 11);
  check<96, 0, 22, 22, 1, 4, 2, 2, 2>(5, 12);
  check<128, 6, 9, 9, 1, 2, 8, 2, 1>(9, 13);
  check<64, 0, 3, 3, 1, 4, 1, 2, 4>(2, 14);
}

// MMA 2 (rows as mma's M): an m-tile's 16 rows spanning two siblings, rows clamped past the
// row space, a gate and up pair on lanes 4 apart (one warp's rows), 2 to 19 tokens over tiles of 8,
// 16 and 32 (ragged; two tiles side by side), K split 1, 2 and 4 ways, K not a multiple of 32.
TEST(MatmulSiblingsOnHost, RowsAsMTilesMatchTheCpuOp) {
  check<96, 10, 14, 6, 0, 4, 8, 16, 4, 2>(2, 21);
  check<128, 6, 9, 9, 1, 4, 16, 16, 2, 2>(11, 22);
  check<136, 0, 22, 22, 1, 2, 8, 32, 1, 2>(13, 23);
  check<96, 10, 14, 14, 1, 4, 32, 16, 4, 2>(19, 24);
  check<136, 6, 9, 9, 1, 4, 16, 16, 2, 2, 1>(11, 25);  // x loaded a round ahead (XPF 1)
}

// YA_F32 1 with Y_DT bf16 (a MoE layer's router before its shared expert's gate and up): y, the
// first sibling's, is stored f32 -- the logits to f32 summation order -- and the SwiGLU bf16, from
// gate and up rounded to bf16 first as the unfused chain stores them.
template <int K, int N, int M, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA>
void check_f32_first(int T, uint64_t seed) {
  const std::vector<float> x = uniform(static_cast<size_t>(T) * K, seed, 1.f, false);
  const std::vector<float> w = uniform(static_cast<size_t>(N) * K, seed + 1, 0.2f, true), g = uniform(static_cast<size_t>(M) * K, seed + 2, 0.2f, true),
                           u = uniform(static_cast<size_t>(M) * K, seed + 3, 0.2f, true);
  const std::vector<uint16_t> wb = bits(w), gb = bits(g), ub = bits(u);
  std::vector<float> logits(static_cast<size_t>(T) * N, NAN);
  std::vector<uint16_t> h(static_cast<size_t>(T) * M, 0xFFFFu), up_out(static_cast<size_t>(T) * M, 0xFFFFu);
  constexpr int GROUPS = WARPS / KSPLIT, ROWS = N + 2 * M;
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, (ROWS + RPW * GROUPS - 1) / (RPW * GROUPS), 32 * WARPS, [&] {
    kp::matmul_siblings<K, N, M, M, 1, 0, kp::F32, kp::BF16, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 1>(
        x.data(), wb.data(), gb.data(), ub.data(), logits.data(), h.data(), up_out.data(), T, K, N, M, M, nullptr, nullptr, 0.f);
  });
  const std::string what = "MMA " + std::to_string(MMA) + " tokens " + std::to_string(T);
  EXPECT_LT(relative_error(logits, matmul(x, w, T, N, K)), 1e-5) << what;
  const std::vector<float> gate = matmul(x, g, T, M, K), upv = matmul(x, u, T, M, K);
  std::vector<float> want(gate.size()), got(h.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float a = bf16_to_float(float_to_bf16(gate[i])), b = bf16_to_float(float_to_bf16(upv[i]));
    want[i] = a / (1.f + std::exp(-a)) * b;
    got[i] = bf16_to_float(h[i]);
  }
  EXPECT_LT(relative_error(got, want), 1e-2) << what;  // one bf16 rounding of the result
  for (uint16_t v : up_out) ASSERT_EQ(v, 0xFFFFu) << what << ": the up rows' output written";
}

TEST(MatmulSiblingsOnHost, AnF32FirstSiblingBesideBf16GateAndUp) {
  check_f32_first<96, 10, 14, 4, 1, 4, 4, 0>(1, 31);
  check_f32_first<128, 6, 9, 4, 2, 2, 2, 0>(5, 32);
  check_f32_first<128, 6, 9, 4, 16, 16, 2, 2>(11, 33);
}

// ROUTE_K (the router routed by its logits' launch): the last router block routes the step as
// kp::moe_router does from the same logits (ids and weights bit for bit), the count back at 0; the
// router rows spanning several row blocks and token tiles, CUDA cores and rows-as-M.
template <int K, int N, int M, int TOPK, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA>
void check_routed(int T, uint64_t seed) {
  const std::vector<float> x = uniform(static_cast<size_t>(T) * K, seed, 1.f, false);
  const std::vector<uint16_t> wb = bits(uniform(static_cast<size_t>(N) * K, seed + 1, 0.5f, true)),
                              gb = bits(uniform(static_cast<size_t>(M) * K, seed + 2, 0.2f, true)),
                              ub = bits(uniform(static_cast<size_t>(M) * K, seed + 3, 0.2f, true));
  const std::vector<float> bias = uniform(N, seed + 4, 0.3f, false);
  std::vector<float> logits(static_cast<size_t>(T) * N, NAN), wts(static_cast<size_t>(T) * TOPK, NAN), wts2(wts.size(), NAN);
  std::vector<uint16_t> h(static_cast<size_t>(T) * M), up_out(static_cast<size_t>(T) * M);
  std::vector<int32_t> ids(static_cast<size_t>(T) * TOPK, -1), ids2(ids.size(), -2);
  unsigned count = 0;
  constexpr int GROUPS = WARPS / KSPLIT, ROWS = N + 2 * M;
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, (ROWS + RPW * GROUPS - 1) / (RPW * GROUPS), 32 * WARPS, [&] {
    kp::matmul_siblings<K, N, M, M, 1, 0, kp::F32, kp::BF16, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 1, TOPK, 1>(
        x.data(), wb.data(), gb.data(), ub.data(), logits.data(), h.data(), up_out.data(), T, K, N, M, M, nullptr, nullptr, 0.f,
        bias.data(), ids.data(), wts.data(), &count, 2.5f);
  });
  cuda_host::launch((T + 3) / 4, 1, 128, [&] {
    kp::moe_router<N, TOPK, 1, 1, 1, 4>(logits.data(), bias.data(), ids2.data(), wts2.data(), T, 2.5f);
  });
  const std::string what = "MMA " + std::to_string(MMA) + " tokens " + std::to_string(T);
  EXPECT_EQ(count, 0u) << what << ": the count is put back";
  EXPECT_EQ(ids, ids2) << what;
  for (size_t i = 0; i < wts.size(); ++i) ASSERT_EQ(wts[i], wts2[i]) << what << " weight " << i;
}

TEST(MatmulSiblingsOnHost, TheLastRouterBlockRoutesTheStep) {
  check_routed<64, 40, 8, 4, 4, 1, 4, 4, 0>(1, 41);   // 10 router row blocks
  check_routed<64, 40, 8, 4, 4, 2, 2, 2, 0>(5, 42);   // 3 token tiles x 20 router row blocks
  check_routed<64, 48, 8, 6, 4, 8, 16, 2, 2>(11, 43); // rows-as-M: 2 token tiles x 2 router row blocks
}

}  // namespace
}  // namespace kplan::codegen
