// kp::matmul's rows-as-M tensor-core tiles (kernels_templates/matmul.cuh MMA 2) run on the host
// (cuda_host_shim.h: a fiber per CUDA thread, mma.sync emulated warp-wide), so CI checks the
// fragment layout of the few-token steps without a GPU: f32 x (hi + lo, two MMAs) and bf16 x (one),
// 2 to 40 tokens over tiles of 8, 16 and 32 (ragged; several tiles side by side), K split 1, 2 and
// 4 ways, K not a multiple of 32, rows past N clamped, x rows that are not 16-byte aligned and a
// weight view that is not (the scalar loads), x loaded as its MMAs come or a round ahead (XPF). The fused norm and MoE combine are in
// matmul_fusions_host_test.cc, the siblings' launch in matmul_siblings_host_test.cc; the device
// runs the same source through NVRTC (gpu_ops_test.cc's GpuOps.MatmulRowsAsM*).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/support/dtype.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/matmul.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;

// One launch over T tokens (x rows `stride` apart; W `w_offset` elements into its buffer) against
// the CPU's x W^T.
template <int K, int N, int X_DT, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int UNROLL, int XPF = 0>
void check(int T, int stride, int w_offset, uint64_t seed) {
  std::vector<float> x = testing_util::xorshift_uniform(static_cast<size_t>(T) * stride, seed, 2.f);
  if (X_DT == kp::BF16) x = testing_util::rounded_to_bf16(x);
  const std::vector<uint16_t> x_bits = testing_util::bf16_bits(x);
  const std::vector<float> w = testing_util::rounded_to_bf16(testing_util::xorshift_uniform(static_cast<size_t>(N) * K + w_offset, seed + 1, 0.2f));
  const std::vector<uint16_t> wb = testing_util::bf16_bits(w);
  std::vector<float> y(static_cast<size_t>(T) * N, NAN);
  constexpr int GROUPS = WARPS / KSPLIT;
  const unsigned row_blocks = (N + RPW * GROUPS - 1) / (RPW * GROUPS);
  const void* xp = X_DT == kp::BF16 ? static_cast<const void*>(x_bits.data()) : x.data();
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, row_blocks, 32 * WARPS, [&] {
    kp::matmul<K, N, X_DT, kp::F32, 0, 0, 0, 0, WARPS, TOK_TILE, RPW, KSPLIT, UNROLL, 2, 0, XPF>(
        xp, wb.data() + w_offset, y.data(), y.data(), T, stride, 0, N, 0, 0, nullptr, nullptr, 0.f, nullptr);
  });
  std::vector<float> xs(static_cast<size_t>(T) * K);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < K; ++k) xs[t * K + k] = x[t * stride + k];
  const std::vector<float> want = testing_util::reference_matmul(xs, std::vector<float>(w.begin() + w_offset, w.end()), T, N, K);
  EXPECT_LT(relative_error(y, want), 1e-5) << "X_DT " << X_DT << " XPF " << XPF << " tokens " << T << " tile " << TOK_TILE << " RPW " << RPW << " KSPLIT "
                                           << KSPLIT << " stride " << stride << " w offset " << w_offset;
}

TEST(MatmulRowsAsMOnHost, F32ActivationsMatchTheCpuOp) {
  check<256, 64, kp::F32, 4, 8, 16, 4, 2>(8, 256, 0, 1);     // one n-tile, full
  check<256, 40, kp::F32, 4, 8, 32, 2, 1>(2, 256, 0, 2);     // 2 tokens of 8, rows past N
  check<136, 48, kp::F32, 2, 16, 16, 1, 4>(13, 136, 0, 3);   // K % 32 != 0: lanes past K read zeros
  check<128, 32, kp::F32, 4, 32, 16, 4, 2>(40, 128, 0, 4);   // two tiles of 32 side by side
}

TEST(MatmulRowsAsMOnHost, Bf16ActivationsMatchTheCpuOp) {
  check<256, 64, kp::BF16, 4, 8, 16, 2, 2>(7, 256, 0, 5);
  check<192, 32, kp::BF16, 4, 16, 32, 4, 1>(16, 192, 0, 6);
}

TEST(MatmulRowsAsMOnHost, UnalignedViewsTakeTheScalarLoads) {
  check<128, 32, kp::F32, 4, 8, 16, 2, 2>(5, 131, 0, 7);   // x rows not 16-byte aligned
  check<128, 32, kp::F32, 4, 16, 16, 2, 2>(9, 128, 1, 8);  // W one element in
  check<128, 32, kp::BF16, 4, 8, 16, 4, 2>(3, 133, 3, 9);
}

// XPF 1: a round's x fragments loaded beside its weights, before its MMAs; the last round's
// chunks past K (K % 32 != 0) and past the slice's share are not loaded (the MMAs take zeros there).
TEST(MatmulRowsAsMOnHost, XLoadedARoundAheadMatchesTheCpuOp) {
  check<136, 48, kp::F32, 2, 16, 16, 1, 4, 1>(13, 136, 0, 11);
  check<256, 40, kp::F32, 4, 8, 32, 4, 2, 1>(5, 256, 0, 12);
  check<192, 32, kp::BF16, 4, 16, 16, 2, 8, 1>(16, 192, 0, 13);
  check<128, 32, kp::F32, 4, 8, 16, 2, 2, 1>(5, 131, 1, 14);  // scalar x and weight loads
}

}  // namespace
}  // namespace kplan::codegen
