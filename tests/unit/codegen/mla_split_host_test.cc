// kernels_templates/mla_split.cuh run on the host (cuda_host_shim.h: a fiber per CUDA thread),
// so CI checks the split-context MLA pair's own code without a GPU: mla_split_partial then
// mla_split_combine against the CPU op (cpu::mla_attention_absorbed), causal and tree-masked,
// with no committed rows, an odd number of them and many splits, splits that see no visible key
// (their m = -inf), f32 and bf16 caches, head groups with idle warps, and latent widths that are
// not multiples of 32; the tensor-core partial (MMA 1) through the shim's mma.sync the same way.
// The device runs the same source through NVRTC (gpu_ops_test.cc's GpuOps.MlaSplit*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/codegen/families/mla_split.h"
#include "compiler/codegen/launch_geometry.h"
#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "runtime/cpu/mla_attention.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/mla_split.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;

std::vector<float> uniform(size_t n, uint64_t seed, float scale = 1.f) { return testing_util::xorshift_uniform(n, seed, scale); }

// Ancestor-or-self mask of a random tree over T nodes (parent < child), [T, ceil(T/32)] words.
std::vector<uint32_t> tree_mask(int64_t T, uint64_t seed) {
  const int64_t words = (T + 31) / 32;
  std::vector<uint32_t> mask(T * words, 0);
  std::vector<int64_t> parent(T, -1);
  const std::vector<float> r = uniform(T, seed);
  for (int64_t i = 1; i < T; ++i) parent[i] = static_cast<int64_t>((r[i] * 0.5f + 0.5f) * i) % i;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t a = i; a >= 0; a = parent[a]) mask[i * words + a / 32] |= 1u << (a % 32);
  return mask;
}

struct Result {
  double error = 0;
  int empty_splits = 0;  // partials with m = -inf
};

// The pair over a cache of past + T rows (+3 unused), q rows padded (strides wider than the
// heads), and the CPU op over the same values. MMA 1: the tensor-core partial (16 heads a block);
// Q_DT bf16: queries stored (and compared) as bf16; DENSE_Q: q rows without padding (the plans'
// layout: the tensor-core partial's 16-byte query loads).
// pad > 0: the last `pad` step tokens are a verify bucket's padding: their cache rows and the rows
// past the step hold NaN (what a padded token may leave there, or a neighbouring buffer past the
// cache's end); no real token sees them, so the real tokens' outputs must stay the CPU op's.
template <int H, int C, int R, int KV_DT, int WARPS, int KT, int MMA = 0, int Q_DT = kp::F32, bool DENSE_Q = false>
Result run(int64_t past, int64_t T, int splits, bool tree, uint64_t seed, int64_t pad = 0) {
  constexpr int D = C + R, QR_HEAD = DENSE_Q ? R : R + 3;
  const int64_t ql_stride = DENSE_Q ? H * C : H * C + 5, qr_stride = H * QR_HEAD, slots = past + T + 3, words = (T + 31) / 32;
  std::vector<float> ql = uniform(T * ql_stride, seed), qr = uniform(T * qr_stride, seed + 1);
  std::vector<uint16_t> ql_bf16, qr_bf16;
  if (Q_DT == kp::BF16) {
    for (float& v : ql) ql_bf16.push_back(float_to_bf16(v)), v = bf16_to_float(ql_bf16.back());
    for (float& v : qr) qr_bf16.push_back(float_to_bf16(v)), v = bf16_to_float(qr_bf16.back());
  }
  const void* q_lat = Q_DT == kp::BF16 ? static_cast<const void*>(ql_bf16.data()) : ql.data();
  const void* q_rot = Q_DT == kp::BF16 ? static_cast<const void*>(qr_bf16.data()) : qr.data();
  std::vector<float> cache = uniform(slots * D, seed + 2);
  for (int64_t s = past + T - pad; pad > 0 && s < slots; ++s) std::fill_n(cache.begin() + s * D, D, std::nanf(""));
  std::vector<uint16_t> cache_bf16;
  if (KV_DT == kp::BF16)
    for (float& v : cache) {
      cache_bf16.push_back(float_to_bf16(v));
      v = bf16_to_float(cache_bf16.back());
    }
  const std::vector<uint32_t> mask = tree ? tree_mask(T, seed + 3) : std::vector<uint32_t>();
  const std::vector<int32_t> len = {static_cast<int32_t>(past)};
  std::vector<float> ws(T * H * splits * (C + 2), std::nanf("")), out(T * H * C + 7, std::nanf(""));
  const float scale = 0.17f;
  const void* kv = KV_DT == kp::BF16 ? static_cast<const void*>(cache_bf16.data()) : cache.data();
  cuda_host::launch(
      splits, T, 32 * WARPS,
      [&] {
        kp::mla_split_partial<H, C, R, Q_DT, KV_DT, WARPS, KT, MMA>(q_lat, q_rot, kv, len.data(), tree ? mask.data() : nullptr, ws.data(),
                                                                    T, splits, ql_stride, qr_stride, QR_HEAD, words, scale);
      },
      mla_split_smem_bytes(H, C, R, KT, MMA, Q_DT == kp::F32), MMA >= 2 ? 1 : MMA == 1 ? H / 16 : (H + WARPS - 1) / WARPS);
  Result res;
  for (int64_t p = 0; p < T * H * splits; ++p) res.empty_splits += std::isinf(ws[p * (C + 2)]) && ws[p * (C + 2)] < 0;
  cuda_host::launch(H, T, 64, [&] { kp::mla_split_combine<H, C, kp::F32, 64, 1>(ws.data(), out.data(), T, splits, H * C); });
  // The combine in column chunks of 8 (C / 8 blocks a head, 8 groups of threads over the splits):
  // the same sums in another order.
  std::vector<float> chunked(out.size(), std::nanf(""));
  constexpr int CH = C % 8 == 0 ? C / 8 : 1;
  cuda_host::launch(
      H, T, 64, [&] { kp::mla_split_combine<H, C, kp::F32, 64, CH>(ws.data(), chunked.data(), T, splits, H * C); }, 0, CH);

  Matrix q_latent(T, H * C), q_rope(T, H * R), latent(past + T, C), k_rope(past + T, R);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < H * C; ++j) q_latent.row(t)[j] = ql[t * ql_stride + j];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < R; ++j) q_rope.row(t)[h * R + j] = qr[t * qr_stride + h * QR_HEAD + j];
  }
  for (int64_t s = 0; s < past + T; ++s) {
    for (int64_t j = 0; j < C; ++j) latent.row(s)[j] = cache[s * D + j];
    for (int64_t j = 0; j < R; ++j) k_rope.row(s)[j] = cache[s * D + C + j];
  }
  const Matrix want = cpu::mla_attention_absorbed(q_latent, q_rope, latent, k_rope, past, mask, cpu::MlaDims{H, C, 0, R, 0}, scale);
  out.resize(want.data.size());
  {  // the chunked combine: every real token's output written, the same values to f32 rounding
    const size_t real = static_cast<size_t>((T - pad) * H * C);
    const std::vector<float> a(out.begin(), out.begin() + real), b(chunked.begin(), chunked.begin() + real);
    EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](float v) { return std::isfinite(v); })) << "the combine in " << CH << " column chunks";
    EXPECT_LT(relative_error(b, a), 1e-6) << "the combine in " << CH << " column chunks";
  }
  if (pad > 0) {  // the real tokens' rows only
    out.resize((T - pad) * H * C);
    std::vector<float> real(want.data.begin(), want.data.begin() + static_cast<int64_t>(out.size()));
    res.error = relative_error(out, real);
    for (const float v : out)
      if (!std::isfinite(v)) res.error = 1;
    return res;
  }
  res.error = relative_error(out, want.data);
  // (relative_error skips NaN: every output, initialised as NaN, must have been written.)
  for (const float v : out)
    if (!std::isfinite(v)) res.error = 1;
  return res;
}

TEST(MlaSplitHost, CausalMatchesTheCpuOp) {
  // Odd committed rows over several splits and tiles; no committed rows (token 0 sees one key, so
  // every other split of it is empty); one split.
  Result r = run<6, 64, 16, kp::F32, 4, 8>(37, 5, 3, false, 1);
  EXPECT_LT(r.error, 1e-4);
  r = run<6, 64, 16, kp::F32, 4, 8>(0, 7, 4, false, 2);
  EXPECT_LT(r.error, 1e-4);
  EXPECT_GT(r.empty_splits, 0) << "token 0's later splits have no key";
  r = run<3, 48, 8, kp::F32, 2, 5>(21, 3, 1, false, 3);
  EXPECT_LT(r.error, 1e-4);
}

TEST(MlaSplitHost, TreeMaskMatchesTheCpuOp) {
  // 40 tree tokens (two mask words) over 11 committed rows in 6 splits; an empty cache with many
  // splits, where a split of the step's rows can hold none of a token's ancestors.
  Result r = run<4, 64, 16, kp::F32, 4, 8>(11, 40, 6, true, 4);
  EXPECT_LT(r.error, 1e-4);
  r = run<4, 64, 16, kp::F32, 4, 8>(0, 40, 10, true, 5);
  EXPECT_LT(r.error, 1e-4);
  EXPECT_GT(r.empty_splits, 0) << "some split sees none of a token's ancestors";
}

// A verify bucket's padded tokens near the end of the context: their rows (and those past the
// cache) hold NaN in tiles the real tokens read; the keys a token does not see are not staged, so
// the real tokens' outputs are the CPU op's (a hidden key's P.V weight 0 times NaN was NaN:
// GpuDrafter.DeviceRoundsAreTheHostRounds's "logits are not finite"). Both partials, causal and
// tree-masked, f32 and bf16 caches.
TEST(MlaSplitHost, PaddedTokensRowsDoNotReachRealTokens) {
  Result r = run<4, 64, 16, kp::F32, 4, 8>(11, 8, 3, true, 21, 5);
  EXPECT_LT(r.error, 1e-4);
  r = run<4, 64, 16, kp::BF16, 4, 32>(70, 8, 2, false, 22, 3);
  EXPECT_LT(r.error, 1e-4);
  r = run<16, 64, 16, kp::BF16, 4, 32, 1>(37, 8, 3, true, 23, 5);
  EXPECT_LT(r.error, 1e-4);
  r = run<16, 64, 16, kp::BF16, 4, 16, 1>(20, 8, 2, false, 24, 7);
  EXPECT_LT(r.error, 1e-4);
}

TEST(MlaSplitHost, Bf16CacheAndOddWidths) {
  // A bf16 cache; C = 40 and R = 24 (not multiples of 32), 5 heads over groups of 2 (an idle
  // warp in the last group), a tile of 7 keys (not a multiple of the 4-key groups).
  Result r = run<4, 64, 16, kp::BF16, 4, 8>(19, 6, 3, true, 6);
  EXPECT_LT(r.error, 1e-4);
  r = run<5, 40, 24, kp::F32, 2, 7>(23, 9, 4, false, 7);
  EXPECT_LT(r.error, 1e-4);
  r = run<5, 40, 24, kp::BF16, 2, 7>(50, 33, 5, true, 8);
  EXPECT_LT(r.error, 1e-4);
}

// MMA 1 (the tensor-core partial): 16 heads a block over the bf16 cache, f32 queries as hi + lo
// and the probabilities as hi + lo, so it stays within f32 summation order of the CPU op; causal
// and tree-masked, splits with no visible key, tiles of 16 and 32 keys, 4 and 2 warps (each its
// share of the output columns), two head groups, bf16 queries, padded and dense query rows.
TEST(MlaSplitHost, TensorCorePartialMatchesTheCpuOp) {
  Result r = run<16, 64, 16, kp::BF16, 4, 32, 1>(37, 5, 3, false, 11);
  EXPECT_LT(r.error, 1e-4);
  r = run<16, 64, 16, kp::BF16, 4, 32, 1>(0, 7, 4, false, 12);
  EXPECT_LT(r.error, 1e-4);
  EXPECT_GT(r.empty_splits, 0) << "token 0's later splits have no key";
  r = run<32, 64, 32, kp::BF16, 2, 16, 1>(11, 40, 6, true, 13);
  EXPECT_LT(r.error, 1e-4);
  r = run<16, 128, 32, kp::BF16, 4, 16, 1, kp::BF16>(70, 9, 2, true, 14);
  EXPECT_LT(r.error, 1e-4);
  // Dense query rows (the plans'): the 16-byte query loads, f32 and bf16.
  r = run<32, 64, 16, kp::BF16, 4, 32, 1, kp::F32, true>(45, 6, 3, true, 15);
  EXPECT_LT(r.error, 1e-4);
  r = run<16, 128, 64, kp::BF16, 4, 32, 1, kp::BF16, true>(33, 4, 2, false, 16);
  EXPECT_LT(r.error, 1e-4);
}

// MMA 2 (every head of a token a block, bf16 queries and probabilities, a 3-tile cp.async ring):
// against the CPU op over the same bf16 queries and cache, the probabilities' rounding to bf16
// its only difference (f32 queries: theirs too) (within 1e-2 relative, as the bf16 data path; more than 1e-4 off, so the
// rounding is real). Causal and tree-masked, 1, 2 and 4 m-tiles (2, 4, 8 warps), splits past the
// context (their partial m = -inf, sums unwritten: the combine must skip them), a split of more
// tiles than the ring holds, a last tile of a few keys, and padded query rows.
TEST(MlaSplitHost, AllHeadsTensorCorePartialMatchesTheCpuOp) {
  Result r = run<16, 64, 16, kp::BF16, 2, 32, 2, kp::BF16, true>(37, 5, 3, false, 21);
  EXPECT_LT(r.error, 1e-2);
  EXPECT_GT(r.error, 1e-4) << "the probabilities enter the MMA as bf16";
  r = run<16, 64, 16, kp::BF16, 2, 32, 2, kp::BF16, true>(0, 7, 4, false, 22);  // 7 keys at most: one split has keys
  EXPECT_LT(r.error, 1e-2);
  EXPECT_GT(r.empty_splits, 0) << "the later splits have no key";
  r = run<32, 64, 32, kp::BF16, 4, 32, 2, kp::BF16>(11, 40, 2, true, 23);  // tree-masked, padded q rows
  EXPECT_LT(r.error, 1e-2);
  r = run<16, 32, 32, kp::BF16, 2, 32, 2, kp::BF16, true>(200, 3, 1, false, 24);  // 7 tiles in one split: the ring wraps
  EXPECT_LT(r.error, 1e-2);
  r = run<64, 128, 64, kp::BF16, 8, 32, 2, kp::BF16, true>(70, 2, 2, true, 25);  // K2.6's heads: 4 m-tiles, 8 warps
  EXPECT_LT(r.error, 1e-2);
  // f32 queries, rounded to bf16 once staged (dense rows: the 16-byte loads; padded: one by one).
  r = run<32, 64, 32, kp::BF16, 4, 32, 2, kp::F32, true>(45, 6, 3, true, 26);
  EXPECT_LT(r.error, 1e-2);
  EXPECT_GT(r.error, 1e-4);
  r = run<16, 64, 16, kp::BF16, 2, 32, 2, kp::F32>(90, 3, 2, false, 27);
  EXPECT_LT(r.error, 1e-2);
}

// MMA 3 (MMA 2 with each warp's queries over its depth half in registers, the halves' scores
// added through shared memory, the kh 0 warps taking the softmax): the same cases.
TEST(MlaSplitHost, AllHeadsRegisterQueriesPartialMatchesTheCpuOp) {
  Result r = run<16, 64, 32, kp::BF16, 2, 32, 3, kp::BF16, true>(37, 5, 3, false, 31);
  EXPECT_LT(r.error, 1e-2);
  EXPECT_GT(r.error, 1e-4) << "the probabilities enter the MMA as bf16";
  r = run<16, 64, 32, kp::BF16, 2, 32, 3, kp::BF16, true>(0, 7, 4, false, 32);
  EXPECT_LT(r.error, 1e-2);
  EXPECT_GT(r.empty_splits, 0) << "the later splits have no key";
  r = run<32, 64, 32, kp::BF16, 4, 32, 3, kp::BF16>(11, 40, 2, true, 33);
  EXPECT_LT(r.error, 1e-2);
  r = run<16, 32, 32, kp::BF16, 2, 32, 3, kp::BF16, true>(200, 3, 1, false, 34);
  EXPECT_LT(r.error, 1e-2);
  r = run<64, 128, 64, kp::BF16, 8, 32, 3, kp::BF16, true>(70, 2, 2, true, 35);
  EXPECT_LT(r.error, 1e-2);
  r = run<32, 64, 32, kp::BF16, 4, 32, 3, kp::F32, true>(45, 6, 3, true, 36);
  EXPECT_LT(r.error, 1e-2);
}

// mla_split_combine_uv: the combine and W_UV's product in one launch, against the combine's
// stored (L_DT) result times W_UV on the host (double sums): the same latent rounding, so the
// products agree to f32 summation order. The MMA 0 partial makes the splits (causal and tree,
// splits with no key), several tokens a block, 2 and 4 warps, row chunks of 2 and 4 rows a warp,
// bf16 and f32 outputs; W_UV heads strided as kv_b_proj's (their rows after the W_UK rows).
template <int H, int C, int N, int L_DT, int O_DT, int THREADS, int RB>
double combine_uv_error(int64_t past, int64_t T, int splits, bool tree, uint64_t seed) {
  constexpr int R = 32, D = C + R, WARPS = 4, KT = 8;
  const int64_t slots = past + T, words = (T + 31) / 32;
  const std::vector<float> ql = uniform(T * H * C, seed), qr = uniform(T * H * R, seed + 1), cache = uniform(slots * D, seed + 2);
  const std::vector<uint32_t> mask = tree ? tree_mask(T, seed + 3) : std::vector<uint32_t>();
  const std::vector<int32_t> len = {static_cast<int32_t>(past)};
  std::vector<float> ws(T * H * splits * (C + 2), std::nanf(""));
  cuda_host::launch(
      splits, T, 32 * WARPS,
      [&] {
        kp::mla_split_partial<H, C, R, kp::F32, kp::F32, WARPS, KT, 0>(ql.data(), qr.data(), cache.data(), len.data(),
                                                                      tree ? mask.data() : nullptr, ws.data(), T, splits, H * C, H * R, R,
                                                                      words, 0.2f);
      },
      mla_split_smem_bytes(H, C, R, KT, 0, true), (H + WARPS - 1) / WARPS);
  // The two-launch reference: the combine stores the latent in L_DT; W_UV reads it back.
  std::vector<float> lat(T * H * C, std::nanf(""));
  std::vector<uint16_t> lat_bf16(T * H * C, 0);
  void* lat_out = L_DT == kp::BF16 ? static_cast<void*>(lat_bf16.data()) : lat.data();
  cuda_host::launch(H, T, 64, [&] { kp::mla_split_combine<H, C, L_DT, 64, 1>(ws.data(), lat_out, T, splits, H * C); });
  if (L_DT == kp::BF16)
    for (size_t i = 0; i < lat.size(); ++i) lat[i] = bf16_to_float(lat_bf16[i]);
  constexpr int64_t kHeadStride = 2 * N * C;  // kv_b_proj's: W_UK's N rows, then W_UV's
  const std::vector<float> wf = uniform(H * kHeadStride, seed + 4);
  std::vector<uint16_t> w(wf.size());
  for (size_t i = 0; i < wf.size(); ++i) w[i] = float_to_bf16(wf[i]);
  const uint16_t* w_uv = w.data() + N * C;
  std::vector<float> want(T * H * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(lat[(t * H + h) * C + c]) * bf16_to_float(w_uv[h * kHeadStride + n * C + c]);
        want[(t * H + h) * N + n] = static_cast<float>(acc);
      }
  std::vector<float> y(T * H * N, std::nanf(""));
  std::vector<uint16_t> y_bf16(T * H * N, 0xffffu);  // NaN bits: every element must be written
  void* y_out = O_DT == kp::BF16 ? static_cast<void*>(y_bf16.data()) : y.data();
  cuda_host::launch(H, N / RB, THREADS,
                    [&] { kp::mla_split_combine_uv<H, C, N, L_DT, O_DT, THREADS, RB>(ws.data(), w_uv, y_out, T, splits, kHeadStride, H * N); });
  if (O_DT == kp::BF16) {
    for (size_t i = 0; i < y.size(); ++i) y[i] = bf16_to_float(y_bf16[i]);
    for (float& v : want) v = bf16_to_float(float_to_bf16(v));
  }
  for (const float v : y)
    if (!std::isfinite(v)) return 1;  // unwritten
  const double e = relative_error(y, want);
  std::printf("[ figures  ] combine_uv error %.3g\n", e);
  return e;
}

TEST(MlaSplitHost, CombineWithWuvIsTheCombineThenWuv) {
  EXPECT_LT((combine_uv_error<4, 256, 32, kp::BF16, kp::BF16, 64, 8>(37, 3, 3, false, 41)), 1e-3);  // bf16 out: roundings of equal sums
  EXPECT_LT((combine_uv_error<4, 256, 32, kp::BF16, kp::F32, 64, 8>(37, 3, 3, false, 42)), 1e-5);
  EXPECT_LT((combine_uv_error<4, 256, 32, kp::F32, kp::F32, 128, 16>(0, 5, 4, false, 43)), 1e-5);  // token 0: empty splits
  EXPECT_LT((combine_uv_error<4, 512, 64, kp::BF16, kp::F32, 128, 32>(11, 6, 2, true, 44)), 1e-5);  // tree-masked, 2 x 256 columns
}

TEST(MlaSplitHost, SplitCountFollowsTheContext) {
  // K2.6 width on sm_90 (132 SMs, 8 head groups of 8): 1 token over 1,000 rows takes 32 splits
  // of at least 32 keys (one tile); from 1,024 rows on the grid's 264 blocks cap it at 33; 64 tree
  // tokens take one split.
  const KernelSource k = mla_split_partial_kernel(64, 512, 64, ElemType::F32, ElemType::F32, "sm_90");
  EXPECT_EQ(mla_split_count(k, 4096, 1, "sm_90"), 33);
  EXPECT_EQ(mla_split_count(k, 1000, 1, "sm_90"), 32);
  EXPECT_EQ(mla_split_count(k, 32768, 1, "sm_90"), 33);
  EXPECT_EQ(mla_split_count(k, 32768, 64, "sm_90"), 1);
  EXPECT_EQ(mla_split_count(k, 100, 1, "sm_90"), 4);
  EXPECT_EQ(mla_split_count(k, 10, 1, "sm_90"), 1);
  EXPECT_EQ(mla_split_workspace_bytes(k, 4096, 1, "sm_90"), uint64_t{4} * 33 * 64 * 514);
  // grid (n_splits = the launch's batch, tokens, head groups), 8 warps, 32 staged rows of 576 f32.
  const LaunchDims d = launch_dims(k, 3, 5);
  EXPECT_EQ(d.grid, (std::array<uint32_t, 3>{5, 3, 8}));
  EXPECT_EQ(d.block[0], 256u);
  EXPECT_EQ(d.smem_bytes, 32u * 576 * 4);
  // The combine: 4 column chunks a head (64 heads x 4 fill two blocks an SM), 256 threads.
  const KernelSource comb = mla_split_combine_kernel(64, 512, ElemType::F32, "sm_90");
  EXPECT_EQ(comb.id, "mla_split_combine_h64_c512_of32_t256_ch4");
  const LaunchDims c = launch_dims(comb, 3);
  EXPECT_EQ(c.grid, (std::array<uint32_t, 3>{64, 3, 4}));
  EXPECT_EQ(launch_dims(mla_split_combine_kernel(4, 64, ElemType::F32, "sm_90"), 1).grid, (std::array<uint32_t, 3>{4, 1, 1}));
  // sm_120 (100 KiB per SM): tiles of 16 rows, and 188 SMs' worth of splits.
  const KernelSource b = mla_split_partial_kernel(64, 512, 64, ElemType::F32, ElemType::BF16, "sm_120");
  EXPECT_EQ(launch_dims(b, 1, 1).smem_bytes, 16u * 576 * 4);
  EXPECT_EQ(mla_split_count(b, 32768, 1, "sm_120"), 47);
  // MMA 1 (KPLAN_TUNE=mla_split_partial:MMA=1): 16 heads a block on 4 warps, so 4 head groups at
  // K2.6 and twice the splits of 8 groups (66 at 32768 keys); the bf16 tile (32 rows of 584), the
  // 16 query rows hi and lo and the 16 x 33 scores in shared memory.
  const KernelSource m = instantiate(mla_split_partial::family(), {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 1}}, "sm_90");
  EXPECT_EQ(m.id, "mla_split_partial_h64_c512_r64_qf32_kvbf16_w4_kt32_mma1");
  const LaunchDims md = launch_dims(m, 3, 5);
  EXPECT_EQ(md.grid, (std::array<uint32_t, 3>{5, 3, 4}));
  EXPECT_EQ(md.block[0], 128u);
  EXPECT_EQ(md.smem_bytes, 32u * 1168 + 2 * 16 * 1168 + 16 * 33 * 4);
  EXPECT_EQ(mla_split_count(m, 32768, 1, "sm_90"), 66);
  // MMA 2 (KPLAN_TUNE=mla_split_partial:MMA=2, bf16 queries): every head a block on 8 warps, one
  // block an SM, at most 64 splits a token (their f32 partials' traffic: 64 at 4096 and 32768
  // keys, 8 a token at 16 tokens), 32+ keys a split (17 over 512); the 64 query rows, 3 tiles of
  // 32 rows (584 bf16 each), 64 x 40 bf16 probabilities and 5 x 64 f32.
  const KernelSource w = instantiate(mla_split_partial::family(), {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 2}}, "sm_90");
  EXPECT_EQ(w.id, "mla_split_partial_h64_c512_r64_qbf16_kvbf16_w8_kt32_mma2");
  const LaunchDims wd = launch_dims(w, 3, 5);
  EXPECT_EQ(wd.grid, (std::array<uint32_t, 3>{5, 3, 1}));
  EXPECT_EQ(wd.block[0], 256u);
  EXPECT_EQ(wd.smem_bytes, 64u * 1168 + 3 * 32 * 1168 + 64 * 40 * 2 + 5 * 64 * 4);
  EXPECT_EQ(mla_split_count(w, 32768, 1, "sm_90"), 64);
  EXPECT_EQ(mla_split_count(w, 32768, 2, "sm_90"), 64);  // 66 blocks a token's share, capped
  EXPECT_EQ(mla_split_count(w, 32768, 16, "sm_90"), 8);
  EXPECT_EQ(mla_split_count(w, 4096, 1, "sm_90"), 64);
  EXPECT_EQ(mla_split_count(w, 512, 1, "sm_90"), 17);
  setenv("KPLAN_MLA_MAX_SPLITS", "132", 1);  // measuring: the grid's one block an SM alone
  EXPECT_EQ(mla_split_count(w, 32768, 1, "sm_90"), 132);
  EXPECT_EQ(mla_split_count(k, 32768, 1, "sm_90"), 33) << "the cap is the all-heads partial's only";
  unsetenv("KPLAN_MLA_MAX_SPLITS");
  // MMA 3: the same grid, and a row of 40 f32 scores a head more.
  const KernelSource w3 = instantiate(mla_split_partial::family(), {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 3}}, "sm_90");
  EXPECT_EQ(launch_dims(w3, 3, 5).smem_bytes, wd.smem_bytes + 64 * 40 * 4);
  EXPECT_EQ(launch_dims(w3, 3, 5).grid, wd.grid);
  EXPECT_EQ(mla_split_count(w3, 32768, 1, "sm_90"), 64);
}

// MMA 1's shapes, refused by name: a cache in f32, heads not in m-tiles of 16, C not split evenly
// over the warps' n-tiles, a KT not in k-steps of 16.
TEST(MlaSplitHost, TensorCoreShapesAreClearErrors) {
  auto message = [](ParamValues p) {
    try {
      instantiate(mla_split_partial::family(), p, "sm_90");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ParamValues p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 0}, {"KV_DT", 0}, {"MMA", 1}};
  EXPECT_NE(message(p).find("MMA 1 reads a bf16 cache"), std::string::npos) << message(p);
  p = {{"HEADS", 24}, {"C", 512}, {"R", 64}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 1}};
  EXPECT_NE(message(p).find("m-tiles of 16"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 40}, {"R", 24}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 1}};
  EXPECT_NE(message(p).find("n-tiles of 8"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 1}, {"KT", 24}};
  EXPECT_NE(message(p).find("KT 16 or 32"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 4}};
  EXPECT_NE(message(p).find("MMA must be 0"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 512}, {"R", 48}, {"Q_DT", 0}, {"KV_DT", 1}, {"MMA", 3}};
  EXPECT_NE(message(p).find("MMA 3 splits C + R in two halves"), std::string::npos) << message(p);
  // MMA 2: two warps an m-tile, KT 32, C in n-tile pairs over the warps, the
  // shared memory of 64 heads' queries and three tiles (128 heads: past 224 KiB).
  p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 2}, {"WARPS", 4}};
  EXPECT_NE(message(p).find("two warps an m-tile"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 2}, {"KT", 16}};
  EXPECT_NE(message(p).find("MMA 2 takes KT 32"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 120}, {"R", 8}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 2}};
  EXPECT_NE(message(p).find("n-tile pairs of 16"), std::string::npos) << message(p);
  p = {{"HEADS", 128}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 1}, {"MMA", 2}};
  EXPECT_NE(message(p).find("exceed 224 KiB"), std::string::npos) << message(p);
  p = {{"HEADS", 64}, {"C", 512}, {"R", 64}, {"Q_DT", 1}, {"KV_DT", 0}, {"MMA", 2}};
  EXPECT_NE(message(p).find("MMA 2 reads a bf16 cache"), std::string::npos) << message(p);
}

// Where MMA 2 fits (a bf16 cache, heads by 16 whose queries and ring fit the shared memory, C in
// n-tile pairs over HEADS / 8 warps) KPLAN_MLA_WIDE=1 makes it the partial's tuning; elsewhere the
// CUDA-core partial stays; KPLAN_MLA_WIDE=0 keeps MMA 0 everywhere.
TEST(MlaSplitHost, AllHeadsPartialWhereItFits) {
  auto mma = [](int64_t heads, int64_t c, ElemType kv) { return kernel_param(mla_split_partial_kernel(heads, c, 64, ElemType::F32, kv, "sm_90"), "MMA"); };
  setenv("KPLAN_MLA_WIDE", "1", 1);
  EXPECT_EQ(mma(64, 512, ElemType::BF16), 2);
  EXPECT_EQ(mma(16, 512, ElemType::BF16), 2);
  EXPECT_EQ(mma(64, 512, ElemType::F32), 0) << "an f32 cache";
  EXPECT_EQ(mma(8, 512, ElemType::BF16), 0) << "heads not by 16";
  EXPECT_EQ(mma(128, 512, ElemType::BF16), 0) << "128 heads' queries and the ring exceed the shared memory";
  EXPECT_EQ(mma(64, 480, ElemType::BF16), 0) << "C not in n-tile pairs over 8 warps";
  EXPECT_EQ(kernel_param(mla_split_partial_kernel(64, 512, 64, ElemType::F32, ElemType::BF16, "sm_120"), "MMA"), 0) << "sm_120's 99 KiB a block";
  setenv("KPLAN_MLA_WIDE", "0", 1);
  EXPECT_EQ(mma(64, 512, ElemType::BF16), 0);
  unsetenv("KPLAN_MLA_WIDE");
}

// KPLAN_MLA_MIN_KEYS (measuring) sets the keys a split; 0 would divide by zero: refused by name.
TEST(MlaSplitHost, MinKeysSwitchSetsTheSplitsAndRefusesZero) {
  const KernelSource k = mla_split_partial_kernel(64, 512, 64, ElemType::F32, ElemType::F32, "sm_90");
  setenv("KPLAN_MLA_MIN_KEYS", "128", 1);
  EXPECT_EQ(mla_split_count(k, 1000, 1, "sm_90"), 8);  // ceil(1001 / 128)
  setenv("KPLAN_MLA_MIN_KEYS", "0", 1);
  std::string message;
  try {
    mla_split_count(k, 1000, 1, "sm_90");
  } catch (const Error& e) {
    message = e.what();
  }
  unsetenv("KPLAN_MLA_MIN_KEYS");
  EXPECT_NE(message.find("KPLAN_MLA_MIN_KEYS must be a key count >= 1, not '0'"), std::string::npos) << message;
  EXPECT_EQ(mla_split_count(k, 1000, 1, "sm_90"), 32);
}

}  // namespace
}  // namespace kplan::codegen
