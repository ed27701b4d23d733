// What the dense matmul templates fuse (kernels_templates/matmul.cuh, matmul_siblings.cuh), run on
// the host (cuda_host_shim.h: a fiber per CUDA thread), so CI checks the launches that replace a
// norm's or a MoE combine's without a GPU:
//   - NORM 1 / 2: y = rms_norm(x, g) W^T against the CPU's, with the norm's sum of squares split
//     over K-slices and row groups, token tiles of 1, 2 and 8 (ragged), f32 and bf16 x, x rows that
//     are not 16-byte aligned (the scalar path), the residual epilogue beside it, and NORM 2's
//     stored rows (written once, by row block 0);
//   - ROUTED: y = residual + (sum of a token's per-pair rows + x W^T), the MoE combine in the
//     shared expert's down projection, on the CUDA cores and the tensor cores;
//   - the rows-as-M tensor-core tiles (MMA 2) with NORM 1 / 2 and ROUTED alike;
//   - NORM 3: the norm launch's bf16 rows then the unfused matmul, bit for bit, in one launch.
// The device runs the same source through NVRTC (gpu_ops_test.cc's GpuOps.MatmulNorm*,
// GpuOps.MatmulCombine*).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <string>
#include <vector>

#include "ir/support/dtype.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/matmul_siblings.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;
const auto& rounded_bf16 = testing_util::rounded_to_bf16;
const auto& bits = testing_util::bf16_bits;
const auto& matmul = testing_util::reference_matmul;

constexpr float kEps = 1e-6f;

// The CPU's rms_norm (runtime/cpu: y = g * (x / sqrt(mean(x^2) + eps))), rows of K at `stride`.
std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& g, int T, int K, int stride) {
  std::vector<float> y(static_cast<size_t>(T) * K);
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int k = 0; k < K; ++k) ss += static_cast<double>(x[t * stride + k]) * x[t * stride + k];
    const double inv = 1.0 / std::sqrt(ss / K + kEps);
    for (int k = 0; k < K; ++k) y[t * K + k] = static_cast<float>(g[k] * (x[t * stride + k] * inv));
  }
  return y;
}
// Activations as the kernel reads them (X_DT bf16: rounded), with a norm weight near 1 and a
// scale unlike 1 (so a missing 1 / rms shows).
struct Inputs {
  std::vector<float> x;        // T rows of `stride`
  std::vector<uint16_t> x_bf16;
  std::vector<float> g;        // [K], bf16 values
  std::vector<uint16_t> g_bits;
};
Inputs inputs(int T, int K, int stride, bool bf16, uint64_t seed) {
  Inputs in;
  in.x = testing_util::xorshift_uniform(static_cast<size_t>(T) * stride, seed, 3.f);
  if (bf16) in.x = rounded_bf16(in.x);
  in.x_bf16 = bits(in.x);
  in.g = testing_util::xorshift_uniform(K, seed + 7, 0.5f);
  for (float& v : in.g) v += 1.f;
  in.g = rounded_bf16(in.g);
  in.g_bits = bits(in.g);
  return in;
}

// kp::matmul with NORM over T tokens (x rows `stride` apart: stride % 4 != 0 takes the scalar x
// path), ACC 1 adding a residual; NORM 2's stored rows against the CPU norm, written in X_DT.
template <int K, int N, int X_DT, int ACC, int NORM, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA = 0, int XPF = 0>
void check_matmul(int T, int stride, uint64_t seed) {
  const Inputs in = inputs(T, K, stride, X_DT == kp::BF16, seed);
  const std::vector<float> w = rounded_bf16(testing_util::xorshift_uniform(static_cast<size_t>(N) * K, seed + 1, 0.2f));
  const std::vector<uint16_t> wb = bits(w);
  const std::vector<float> residual = testing_util::xorshift_uniform(static_cast<size_t>(T) * N, seed + 2);
  std::vector<float> y = residual;
  std::vector<float> out_f32(static_cast<size_t>(T) * K, NAN);
  std::vector<uint16_t> out_bf16(static_cast<size_t>(T) * K, 0xffff);
  const void* x = X_DT == kp::BF16 ? static_cast<const void*>(in.x_bf16.data()) : in.x.data();
  void* norm_out = X_DT == kp::BF16 ? static_cast<void*>(out_bf16.data()) : out_f32.data();
  constexpr int GROUPS = WARPS / KSPLIT;
  const unsigned row_blocks = (N + RPW * GROUPS - 1) / (RPW * GROUPS);
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, row_blocks, 32 * WARPS, [&] {
    kp::matmul<K, N, X_DT, kp::F32, 0, ACC, 0, NORM, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, XPF>(
        x, wb.data(), y.data(), y.data(), T, stride, 0, N, 0, 0, in.g_bits.data(), norm_out, kEps, nullptr);
  });
  const std::vector<float> normed = rms_norm(in.x, in.g, T, K, stride);
  std::vector<float> want = matmul(normed, w, T, N, K);
  if (ACC)
    for (size_t i = 0; i < want.size(); ++i) want[i] += residual[i];
  const std::string what = "matmul NORM " + std::to_string(NORM) + " MMA " + std::to_string(MMA) + " tokens " + std::to_string(T) +
                           " stride " + std::to_string(stride);
  EXPECT_LT(relative_error(y, want), 1e-5) << what;
  std::vector<float> stored = out_f32;
  if (X_DT == kp::BF16)
    for (size_t i = 0; i < stored.size(); ++i) stored[i] = bf16_to_float(out_bf16[i]);
  if (NORM == 2) {
    EXPECT_LT(relative_error(stored, X_DT == kp::BF16 ? rounded_bf16(normed) : normed), X_DT == kp::BF16 ? 1e-2 : 1e-6) << what;
  } else {
    for (float v : stored) ASSERT_TRUE(std::isnan(v)) << what << ": NORM 1 wrote the norm's rows";
  }
}

// kp::matmul_siblings with NORM: each sibling (or GLU 1's swiglu) of the normed x.
template <int K, int N, int N2, int N3, int GLU, int NORM, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA = 0>
void check_siblings(int T, uint64_t seed) {
  const Inputs in = inputs(T, K, K, false, seed);
  const int rows[3] = {N, N2, N3};
  std::vector<std::vector<float>> w;
  std::vector<std::vector<uint16_t>> wb;
  std::vector<std::vector<float>> y;
  for (int s = 0; s < 3; ++s) {
    w.push_back(rounded_bf16(testing_util::xorshift_uniform(static_cast<size_t>(std::max(rows[s], 1)) * K, seed + 1 + s, 0.2f)));
    wb.push_back(bits(w[s]));
    y.emplace_back(static_cast<size_t>(T) * std::max(rows[s], 1), NAN);
  }
  std::vector<float> norm_out(static_cast<size_t>(T) * K, NAN);
  constexpr int GROUPS = WARPS / KSPLIT;
  const unsigned row_blocks = (N + N2 + N3 + RPW * GROUPS - 1) / (RPW * GROUPS);
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, row_blocks, 32 * WARPS, [&] {
    kp::matmul_siblings<K, N, N2, N3, GLU, NORM, kp::F32, kp::F32, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 0>(
        in.x.data(), wb[0].data(), wb[1].data(), wb[2].data(), y[0].data(), y[1].data(), y[2].data(), T, K, std::max(N, 1), N2,
        std::max(N3, 1), in.g_bits.data(), norm_out.data(), kEps);
  });
  const std::vector<float> normed = rms_norm(in.x, in.g, T, K, K);
  const std::string what = "siblings GLU " + std::to_string(GLU) + " NORM " + std::to_string(NORM) + " MMA " + std::to_string(MMA) +
                           " tokens " + std::to_string(T);
  if (N > 0) {
    EXPECT_LT(relative_error(y[0], matmul(normed, w[0], T, N, K)), 1e-5) << what;
  }
  if (GLU == 0) {
    EXPECT_LT(relative_error(y[1], matmul(normed, w[1], T, N2, K)), 1e-5) << what;
  } else {
    const std::vector<float> gate = matmul(normed, w[1], T, N2, K), up = matmul(normed, w[2], T, N3, K);
    std::vector<float> want(gate.size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
    EXPECT_LT(relative_error(y[1], want), 1e-5) << what;
  }
  if (NORM == 2) {
    EXPECT_LT(relative_error(norm_out, normed), 1e-6) << what;
  } else {
    for (float v : norm_out) ASSERT_TRUE(std::isnan(v)) << what << ": NORM 1 wrote the norm's rows";
  }
}

// The sum of squares over K split 1, 2 and 4 ways, one and two row groups a block (each group's
// slices cover K once), token tiles of 1, 2 and 8 over 1 to 11 tokens, several row blocks.
TEST(MatmulNormOnHost, MatmulReadsTheNormOfX) {
  check_matmul<256, 24, kp::F32, 0, 1, 4, 1, 4, 4>(1, 256, 1);
  check_matmul<256, 24, kp::F32, 0, 1, 4, 2, 2, 2>(5, 256, 2);
  check_matmul<128, 20, kp::F32, 0, 1, 2, 8, 2, 1>(11, 128, 3);
  check_matmul<96, 12, kp::BF16, 0, 1, 4, 2, 2, 4>(3, 96, 4);
}

// x rows 16-byte aligned or not (the scalar x and g path), K not a multiple of 8, the fused residual add beside the
// norm, and NORM 2's rows: written by row block 0 of each token tile, in X_DT.
TEST(MatmulNormOnHost, MatmulStoresTheNormForOtherReaders) {
  check_matmul<256, 24, kp::F32, 1, 2, 4, 1, 4, 4>(1, 256, 5);
  check_matmul<128, 20, kp::F32, 0, 2, 4, 2, 2, 2>(5, 131, 6);
  check_matmul<128, 20, kp::F32, 1, 1, 4, 2, 2, 2>(3, 133, 7);
  check_matmul<96, 12, kp::BF16, 0, 2, 4, 8, 2, 2>(9, 96, 8);
  check_matmul<100, 12, kp::F32, 0, 2, 4, 2, 2, 2>(3, 100, 9);  // K % 8 != 0: the scalar weight path
}

// The siblings' launch of q_a + kv_a (two), a router beside its shared expert's GLU pair (three,
// NORM 2: the routed experts read the norm) and a dense MLP's pair alone.
TEST(MatmulNormOnHost, SiblingsReadTheNormOfX) {
  check_siblings<128, 10, 14, 0, 0, 1, 4, 1, 4, 4>(1, 11);
  check_siblings<128, 6, 9, 9, 1, 2, 4, 2, 2, 2>(5, 12);
  check_siblings<96, 0, 22, 22, 1, 1, 2, 8, 2, 1>(9, 13);
  check_siblings<64, 4, 6, 6, 1, 2, 4, 1, 2, 4>(2, 14);
}

// The rows-as-M tensor-core tiles (MMA 2) fold the norm in as the CUDA cores do: the squares
// from the same x loads, added over each quad's lanes and the K split; f32 and bf16 x (x scaled by
// the norm weight is split into hi + lo either way), x rows not 16-byte aligned, the residual
// add, NORM 2's rows, x loaded a round ahead (XPF 1), and the siblings' launch (q_a + kv_a, a
// router beside its GLU pair).
TEST(MatmulNormOnHost, RowsAsMTilesReadTheNormOfX) {
  check_matmul<256, 40, kp::F32, 0, 1, 4, 8, 16, 2, 2>(5, 256, 31);
  check_matmul<256, 40, kp::F32, 1, 2, 4, 16, 16, 4, 2>(11, 256, 32);
  check_matmul<128, 20, kp::F32, 1, 1, 2, 8, 16, 1, 2>(3, 133, 33);
  check_matmul<96, 48, kp::BF16, 0, 2, 4, 8, 32, 2, 2>(8, 96, 34);
  check_matmul<136, 40, kp::F32, 1, 2, 4, 16, 16, 2, 2, 1>(11, 136, 37);  // x loaded a round ahead (XPF 1), K % 32 != 0
  check_siblings<128, 10, 14, 0, 0, 1, 4, 8, 16, 4, 2>(3, 35);
  check_siblings<128, 6, 9, 9, 1, 2, 4, 16, 16, 2, 2>(9, 36);
}

// NORM 3 (the exact fold): the norm launch of 32 * WARPS threads (kp::rms_norm, bf16 rows) then the
// unfused matmul over its rows, against the one NORM 3 launch, bit for bit: y and every row.
template <int K, int N, int X_DT, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA = 0>
void check_exact_norm(int T, int stride, uint64_t seed) {
  const Inputs in = inputs(T, K, stride, X_DT == kp::BF16, seed);
  const std::vector<uint16_t> wb = bits(rounded_bf16(testing_util::xorshift_uniform(static_cast<size_t>(N) * K, seed + 1, 0.2f)));
  const void* x = X_DT == kp::BF16 ? static_cast<const void*>(in.x_bf16.data()) : in.x.data();
  std::vector<uint16_t> normed(static_cast<size_t>(T) * K, 0xffff);
  cuda_host::launch(T, 1, 32 * WARPS, [&] { kp::rms_norm<K, X_DT, kp::BF16, 32 * WARPS>(x, in.g_bits.data(), normed.data(), T, stride, K, kEps); });
  constexpr int GROUPS = WARPS / KSPLIT;
  const unsigned row_blocks = (N + RPW * GROUPS - 1) / (RPW * GROUPS), tiles = (T + TOK_TILE - 1) / TOK_TILE;
  std::vector<float> two_launches(static_cast<size_t>(T) * N, NAN), one_launch(two_launches.size(), NAN);
  cuda_host::launch(tiles, row_blocks, 32 * WARPS, [&] {
    kp::matmul<K, N, kp::BF16, kp::F32, 0, 0, 0, 0, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 0>(
        normed.data(), wb.data(), two_launches.data(), nullptr, T, K, 0, N, 0, 0, nullptr, nullptr, 0.f, nullptr);
  });
  cuda_host::launch(tiles, row_blocks, 32 * WARPS, [&] {
    kp::matmul<K, N, X_DT, kp::F32, 0, 0, 0, 3, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 0>(
        x, wb.data(), one_launch.data(), nullptr, T, stride, 0, N, 0, 0, in.g_bits.data(), nullptr, kEps, nullptr);
  }, static_cast<size_t>(2 * K * TOK_TILE));
  for (size_t i = 0; i < one_launch.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(one_launch[i]), std::bit_cast<uint32_t>(two_launches[i]))
        << "NORM 3 MMA " << MMA << " tokens " << T << " element " << i << ": " << one_launch[i] << " against " << two_launches[i];
}

// NORM 3 over bf16 and f32 x (the norm's input), x rows not 16-byte aligned, token tiles of 1, 2
// and 8 (ragged), the K split, and the rows-as-M tiles.
TEST(MatmulNormOnHost, ExactNormIsTheNormLaunchThenTheMatmul) {
  check_exact_norm<128, 24, kp::BF16, 4, 1, 4, 4>(1, 128, 41);
  check_exact_norm<256, 20, kp::F32, 4, 2, 2, 2>(5, 261, 42);
  check_exact_norm<96, 12, kp::BF16, 2, 8, 2, 1>(11, 96, 43);
  check_exact_norm<128, 40, kp::BF16, 4, 8, 16, 2, 2>(5, 128, 44);
}

// kp::matmul with ROUTED: y = residual + (sum_r routed[t * ROUTED + r] + x W^T), in place (y is the
// residual, as the plan runs it), MMA 0, 1 or 2 (the epilogue the paths share).
template <int K, int N, int ROUTED, int WARPS, int TOK_TILE, int RPW, int KSPLIT, int MMA>
void check_combine(int T, uint64_t seed) {
  const std::vector<float> x = testing_util::xorshift_uniform(static_cast<size_t>(T) * K, seed);
  const std::vector<float> w = rounded_bf16(testing_util::xorshift_uniform(static_cast<size_t>(N) * K, seed + 1, 0.2f));
  const std::vector<uint16_t> wb = bits(w);
  const std::vector<float> residual = testing_util::xorshift_uniform(static_cast<size_t>(T) * N, seed + 2);
  const std::vector<float> routed = testing_util::xorshift_uniform(static_cast<size_t>(T) * ROUTED * N, seed + 3);
  std::vector<float> y = residual;
  constexpr int GROUPS = WARPS / KSPLIT;
  const unsigned row_blocks = (N + RPW * GROUPS - 1) / (RPW * GROUPS);
  cuda_host::launch((T + TOK_TILE - 1) / TOK_TILE, row_blocks, 32 * WARPS, [&] {
    kp::matmul<K, N, kp::F32, kp::F32, 0, 1, ROUTED, 0, WARPS, TOK_TILE, RPW, KSPLIT, 2, MMA, 0, 0>(
        x.data(), wb.data(), y.data(), y.data(), T, K, 0, N, 0, 0, nullptr, nullptr, 0.f, routed.data());
  });
  const std::vector<float> product = matmul(x, w, T, N, K);
  std::vector<float> want(product.size());
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      float sum = 0.f;  // the combine's order: the pairs in order, then the shared expert, then h
      for (int r = 0; r < ROUTED; ++r) sum += routed[(static_cast<size_t>(t) * ROUTED + r) * N + n];
      want[t * N + n] = residual[t * N + n] + (sum + product[t * N + n]);
    }
  EXPECT_LT(relative_error(y, want), 1e-5) << "ROUTED " << ROUTED << " MMA " << MMA << " tokens " << T;
}

// A token's 8 pairs (K2.6's top-8) or 2, token tiles of 1, 2, 16 (tokens as M, ragged) and 8 (rows
// as M, ragged).
TEST(MatmulCombineOnHost, SharedDownSumsTheRoutedPairs) {
  check_combine<128, 24, 8, 4, 1, 4, 4, 0>(1, 21);
  check_combine<128, 24, 2, 4, 2, 2, 2, 0>(5, 22);
  check_combine<128, 32, 8, 4, 16, 8, 4, 1>(17, 23);
  check_combine<128, 40, 8, 4, 8, 16, 2, 2>(7, 24);
}

}  // namespace
}  // namespace kplan::codegen
