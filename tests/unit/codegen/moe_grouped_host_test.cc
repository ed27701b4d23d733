// kernels_templates/moe_grouped.cuh run on the host (cuda_host_shim.h: a fiber per CUDA thread),
// so CI checks the grouped MoE kernels' own code without a GPU: their result against the CPU op
// (runtime/cpu/moe.h) with clamped ids, bf16 and INT4, ragged tiles and pair chunks, and the
// property they exist for: each chosen expert's weights are streamed once per step (once per
// NT pairs that chose it), the others never. The device runs the same source through NVRTC
// (gpu_ops_test.cc's GpuOps.MoeGrouped*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "compiler/codegen/families/moe_grouped.h"
#include "ir/support/dtype.h"
#include "ir/support/int4_frag.h"
#include "runtime/cpu/moe.h"
#include "tests/unit/codegen/codegen_test_util.h"
// The shim's macros stay below every other include.
#include "tests/unit/codegen/cuda_host_shim.h"
#include "kernels_templates/moe_grouped.cuh"  // (built with -Wno-unknown-pragmas: #pragma unroll)

namespace kplan::codegen {
namespace {

using testing_util::relative_error;

// One projection stack [E, rows, cols]: its device bytes and its values as the CPU op reads them.
struct Stack {
  std::vector<uint16_t> bf16;
  std::vector<int32_t> packed;
  std::vector<uint16_t> scale;
  std::vector<float> values;
  const void* w() const { return packed.empty() ? static_cast<const void*>(bf16.data()) : packed.data(); }
  size_t bytes() const { return packed.empty() ? 2 * bf16.size() : 4 * packed.size(); }
};

uint64_t next(uint64_t& s) {
  s ^= s << 13, s ^= s >> 7, s ^= s << 17;
  return s;
}
float uniform(uint64_t& s) { return static_cast<float>(next(s) >> 40) / 16777216.f * 2.f - 1.f; }

Stack make_stack(int64_t E, int64_t rows, int64_t cols, bool int4, uint64_t seed) {
  Stack st;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  const size_t n = static_cast<size_t>(E * rows * cols);
  st.values.resize(n);
  if (!int4) {
    for (size_t i = 0; i < n; ++i) {
      st.bf16.push_back(float_to_bf16(0.3f * uniform(s)));
      st.values[i] = bf16_to_float(st.bf16.back());
    }
    return st;
  }
  for (size_t i = 0; i < n / 8; ++i) st.packed.push_back(static_cast<int32_t>(next(s) >> 20));
  for (size_t i = 0; i < n / 32; ++i) st.scale.push_back(float_to_bf16(0.02f + 0.01f * uniform(s)));
  for (size_t i = 0; i < n; ++i) {
    const int q = static_cast<int>((static_cast<uint32_t>(st.packed[i / 8]) >> (4 * (i % 8))) & 15u) - 8;
    st.values[i] = static_cast<float>(q) * bf16_to_float(st.scale[i / 32]);
  }
  return st;
}

// The stack as the GPU runtime lays W_LAYOUT 1's weights out (ir/support/int4_frag.h): the same
// values, the words and scales of each octet of rows in fragment order.
Stack frag_stack(const Stack& st, int64_t rows, int64_t cols) {
  Stack f = st;
  int4_frag::repack_words(reinterpret_cast<const unsigned*>(st.packed.data()), reinterpret_cast<unsigned*>(f.packed.data()), rows, cols);
  int4_frag::repack_scales(st.scale.data(), f.scale.data(), rows, cols);
  return f;
}

// Streamed bytes per (stack, expert), from the kernels' __ldcs loads.
struct ReadCounter {
  std::vector<const Stack*> stacks;
  int64_t E = 0;
  std::mutex m;
  std::map<std::pair<int, int64_t>, int64_t> bytes;
  void operator()(const void* p, size_t n) {
    const auto* a = static_cast<const uint8_t*>(p);
    for (size_t k = 0; k < stacks.size(); ++k) {
      const auto* base = static_cast<const uint8_t*>(stacks[k]->w());
      if (a >= base && a < base + stacks[k]->bytes()) {
        const int64_t per_expert = static_cast<int64_t>(stacks[k]->bytes()) / E;
        std::lock_guard<std::mutex> lock(m);
        bytes[{static_cast<int>(k), (a - base) / per_expert}] += static_cast<int64_t>(n);
        return;
      }
    }
    ADD_FAILURE() << "a streaming load outside the expert weights";
  }
};

// One MoE step of T tokens through the three kernels on the host; returns out = y0 + experts(x).
// GX: blocks per expert (grid.x) at most; fewer than the row tiles make each block stream several.
// GZ: blocks an expert's pair chunks are dealt over (grid.z). GROWS / DROWS: gate/up's and
// down's rows per warp (they differ with MMA 1: 8 gate + 8 up rows, 16 down rows an m-tile).
template <int H, int I, int E, int K, int W_FMT, int WARPS, int GROWS, int DROWS, int NT, int PF, unsigned GX, unsigned GZ, int MMA, int RING,
          int W_LAYOUT, int XB, int TMA, int KS = 0>
std::vector<float> run_step(const Stack& g, const Stack& u, const Stack& d, const std::vector<float>& x, const std::vector<int32_t>& ids,
                            const std::vector<float>& weights, const std::vector<float>& y0) {
  const int T = static_cast<int>(x.size() / H);
  std::vector<float> h(static_cast<size_t>(T) * K * I, NAN), partial(static_cast<size_t>(T) * K * H, NAN), out = y0;
  const unsigned slots = static_cast<unsigned>(std::min(E, T * K));
  constexpr int GU_TILE = WARPS / (KS > 1 ? KS : 1) * GROWS;  // KS: a tile is WARPS / KS warps' rows
  const unsigned gu_tiles = (I + GU_TILE - 1) / GU_TILE, dn_tiles = (H + WARPS * DROWS - 1) / (WARPS * DROWS);
  cuda_host::launch(
      std::min(GX, gu_tiles), slots, 32 * WARPS,
      [&] {
        kp::moe_grouped_gate_up<H, I, E, K, W_FMT, kp::F32, WARPS, GROWS, NT, PF, 1, MMA, RING, 0, 0, W_LAYOUT, XB, TMA, KS>(
            x.data(), const_cast<int32_t*>(ids.data()), g.w(), g.scale.data(), u.w(), u.scale.data(), h.data(), T, H, nullptr, nullptr,
            nullptr, 1.f);
      },
      moe_smem_bytes(H, NT, MMA, WARPS, RING, XB, TMA), GZ);
  cuda_host::launch(
      std::min(GX, dn_tiles), slots, 32 * WARPS,
      [&] {
        kp::moe_grouped_down<H, I, E, K, W_FMT, WARPS, DROWS, NT, PF, 1, MMA, RING, W_LAYOUT, XB, TMA>(h.data(), ids.data(), weights.data(), d.w(),
                                                                                    d.scale.data(), partial.data(), T);
      },
      moe_smem_bytes(I, NT, MMA, WARPS, RING, XB, TMA), GZ);
  cuda_host::launch((H + 31) / 32, T, 32, [&] { kp::moe_combine<H, K, kp::F32, 1, 32>(partial.data(), out.data(), out.data(), T, H); });
  return out;
}

float to_bf16(float v) { return bf16_to_float(float_to_bf16(v)); }

// XB 1's reference: the CPU op's experts with the activations rounded to bf16 where the kernels
// stage them (x before gate/up, each pair's SwiGLU row before down), in double.
std::vector<float> bf16_staged_experts(const Stack& g, const Stack& u, const Stack& d, const std::vector<float>& x,
                                       const std::vector<int32_t>& ids, const std::vector<float>& weights, int64_t H, int64_t I,
                                       int64_t E, int64_t K) {
  const int64_t T = static_cast<int64_t>(x.size()) / H;
  std::vector<float> out(x.size(), 0.f), h(I);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t e = std::clamp<int64_t>(ids[t * K + k], 0, E - 1);
      for (int64_t i = 0; i < I; ++i) {
        double gs = 0, us = 0;
        for (int64_t c = 0; c < H; ++c) {
          const double xv = to_bf16(x[t * H + c]);
          gs += xv * g.values[(e * I + i) * H + c];
          us += xv * u.values[(e * I + i) * H + c];
        }
        h[i] = to_bf16(static_cast<float>(gs / (1 + std::exp(-gs)) * us));
      }
      for (int64_t j = 0; j < H; ++j) {
        double s = 0;
        for (int64_t i = 0; i < I; ++i) s += static_cast<double>(h[i]) * d.values[(e * H + j) * I + i];
        out[t * H + j] += static_cast<float>(weights[t * K + k] * s);
      }
    }
  return out;
}

// W_LAYOUT 1: the kernels read the stacks in fragment order (frag_stack). XB 1: against
// bf16_staged_experts. TMA 1: the ring's copies by the copy engine. Returns the step's output.
template <int H, int I, int E, int K, int W_FMT, int WARPS, int GROWS, int DROWS, int NT, int PF, unsigned GX, unsigned GZ, int MMA,
          int RING = 0, int W_LAYOUT = 0, int XB = 0, int TMA = 0, int KS = 0>
std::vector<float> check_step_with(const std::vector<int32_t>& ids, uint64_t seed, std::map<std::pair<int, int64_t>, int64_t>* reads,
                                   double tol) {
  const int64_t T = static_cast<int64_t>(ids.size()) / K;
  Stack g = make_stack(E, I, H, W_FMT, seed), u = make_stack(E, I, H, W_FMT, seed + 1), d = make_stack(E, H, I, W_FMT, seed + 2);
  if constexpr (W_LAYOUT == 1) g = frag_stack(g, E * I, H), u = frag_stack(u, E * I, H), d = frag_stack(d, E * H, I);
  uint64_t s = seed + 99;
  std::vector<float> x(T * H), weights(T * K), y0(T * H);
  for (float& v : x) v = uniform(s);
  for (float& v : weights) v = uniform(s);
  for (float& v : y0) v = uniform(s);
  ReadCounter counter;
  for (const Stack* st : {&g, &u, &d}) counter.stacks.push_back(st);
  counter.E = E;
  cuda_host::on_stream_load = [&](const void* p, size_t n) { counter(p, n); };
  const std::vector<float> got =
      run_step<H, I, E, K, W_FMT, WARPS, GROWS, DROWS, NT, PF, GX, GZ, MMA, RING, W_LAYOUT, XB, TMA, KS>(g, u, d, x, ids, weights, y0);
  cuda_host::on_stream_load = nullptr;
  if (reads) *reads = counter.bytes;

  cpu::Routing r;
  r.top_k = K;
  for (int32_t e : ids) r.experts.push_back(std::clamp<int32_t>(e, 0, E - 1));
  r.weights = weights;
  std::vector<cpu::ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e)
    experts.push_back({g.values.data() + e * I * H, u.values.data() + e * I * H, d.values.data() + e * H * I, I});
  Matrix xm(T, H);
  xm.data = x;
  std::vector<float> want = XB ? bf16_staged_experts(g, u, d, x, ids, weights, H, I, E, K) : cpu::moe_experts(xm, r, experts).data;
  for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
  EXPECT_LT(relative_error(got, want), tol) << "H " << H << " I " << I << " W_FMT " << W_FMT << " MMA " << MMA << " RING " << RING << " NT " << NT
                                                 << " W_LAYOUT " << W_LAYOUT << " XB " << XB << " TMA " << TMA << " KS " << KS << " tokens " << T;
  return got;
}

// The CUDA-core path (MMA 0): one ROWS for both kernels, f32 FMAs (summation order only).
template <int H, int I, int E, int K, int W_FMT, int WARPS, int ROWS, int NT, int PF = 0, unsigned GX = 1u << 30, unsigned GZ = 1>
void check_step(const std::vector<int32_t>& ids, uint64_t seed, std::map<std::pair<int, int64_t>, int64_t>* reads = nullptr) {
  check_step_with<H, I, E, K, W_FMT, WARPS, ROWS, ROWS, NT, PF, GX, GZ, 0>(ids, seed, reads, 1e-5);
}

// The tensor-core path (INT4), both scale schemes (MMA 1: shared over the quad by shuffles; MMA 2:
// each lane's own): gate/up GROWS (8 or 16), down DROWS (16 or 32) rows a warp; activations as
// bf16 hi + lo (each kept to ~2^-17 of itself), so 1e-4 as on the device.
template <int H, int I, int E, int K, int WARPS, int GROWS, int DROWS, int NT, int PF = 0, unsigned GX = 1u << 30, unsigned GZ = 1>
void check_step_mma(const std::vector<int32_t>& ids, uint64_t seed, std::map<std::pair<int, int64_t>, int64_t>* reads = nullptr) {
  check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, 1>(ids, seed, reads, 1e-4);
  check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, 2>(ids, seed, nullptr, 1e-4);
}

// Their 128 + q forms (MMA 4, 3: the dequantisation's subtraction in the first MMA's C).
template <int H, int I, int E, int K, int WARPS, int GROWS, int DROWS, int NT, int PF = 0, unsigned GX = 1u << 30, unsigned GZ = 1>
void check_step_mma_biased(const std::vector<int32_t>& ids, uint64_t seed) {
  check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, 3>(ids, seed, nullptr, 1e-4);
  check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, 4>(ids, seed, nullptr, 1e-4);
}

// The shared-memory ring (RING stages a warp, cp.async; one m-tile a warp: gate/up 8 rows, down
// 16) with both scale schemes' math and a 128 + q form: the same results as the register ring.
template <int H, int I, int E, int K, int WARPS, int NT, int RING, unsigned GX = 1u << 30, unsigned GZ = 1>
void check_step_ring(const std::vector<int32_t>& ids, uint64_t seed, std::map<std::pair<int, int64_t>, int64_t>* reads = nullptr) {
  check_step_with<H, I, E, K, 1, WARPS, 8, 16, NT, 0, GX, GZ, 2, RING>(ids, seed, reads, 1e-4);
  check_step_with<H, I, E, K, 1, WARPS, 8, 16, NT, 0, GX, GZ, 1, RING>(ids, seed, nullptr, 1e-4);
  check_step_with<H, I, E, K, 1, WARPS, 8, 16, NT, 0, GX, GZ, 4, RING>(ids, seed, nullptr, 1e-4);
}

// INT4, 3 tokens x top-2 over 6 experts: experts 1 and 2 chosen by two tokens each (one pair
// chunk of NT 2), 4 and 5 by one, 0 and 3 by none: each chosen expert's three matrices are
// streamed exactly once, the others not at all.
TEST(MoeGroupedOnHost, EachChosenExpertIsStreamedOncePerStep) {
  constexpr int H = 64, I = 32, E = 6;
  const std::vector<int32_t> ids = {1, 4, 1, 2, 5, 2};
  std::map<std::pair<int, int64_t>, int64_t> reads;
  check_step<H, I, E, 2, 1, 1, 2, 2>(ids, 7, &reads);
  const int64_t gate_bytes = I * H / 2, down_bytes = H * I / 2;  // one expert's INT4 matrix
  for (int64_t e = 0; e < E; ++e) {
    const bool chosen = e == 1 || e == 2 || e == 4 || e == 5;
    EXPECT_EQ((reads[{0, e}]), chosen ? gate_bytes : 0) << "gate of expert " << e;
    EXPECT_EQ((reads[{1, e}]), chosen ? gate_bytes : 0) << "up of expert " << e;
    EXPECT_EQ((reads[{2, e}]), chosen ? down_bytes : 0) << "down of expert " << e;
  }
}

// Five tokens all choosing expert 3 (plus clamped ids: -7 -> 0, 40 -> 5): with NT 2 pairs per
// chunk, expert 3's rows are streamed ceil(5 / 2) = 3 times (the later passes hit L2 on a GPU).
// The same with the pair chunks dealt over grid.z = 2 blocks (expert 3's chunks 0 and 2 in one,
// 1 in the other; the others' single chunks in block z = 0): the same result, the same reads.
TEST(MoeGroupedOnHost, PairsPastNtRestreamTheTile) {
  constexpr int H = 64, I = 32, E = 6;
  const std::vector<int32_t> ids = {3, -7, 3, 40, 3, 1, 3, 40, 3, -7};
  for (bool split : {false, true}) {
    std::map<std::pair<int, int64_t>, int64_t> reads;
    if (split)
      check_step<H, I, E, 2, 1, 1, 2, 2, 0, 1u << 30, 2>(ids, 8, &reads);
    else
      check_step<H, I, E, 2, 1, 1, 2, 2>(ids, 8, &reads);
    EXPECT_EQ((reads[{0, 3}]), 3 * I * H / 2) << "split " << split;
    EXPECT_EQ((reads[{2, 3}]), 3 * H * I / 2);
    EXPECT_EQ((reads[{0, 0}]), I * H / 2);  // -7 twice: one chunk of 2
    EXPECT_EQ((reads[{0, 5}]), I * H / 2);  // 40 twice
    EXPECT_EQ((reads[{0, 1}]), I * H / 2);
    EXPECT_EQ((reads[{0, 2}]), 0);
    EXPECT_EQ((reads[{2, 4}]), 0);
  }
}

// bf16 rows of odd length (the one-element path) with ragged tiles (9 rows per block over
// I = 37, H = 75); bf16 16-byte rows and INT4 rows over two staged column chunks (H = 1040, 1056),
// with and without the next (tile, chunk)'s loads issued early (PF).
TEST(MoeGroupedOnHost, OddShapesAndColumnChunksMatchTheCpuOp) {
  check_step<75, 37, 4, 2, 0, 1, 3, 3>({0, 2, 1, 3, 2, 0, 3, 3, -1, 2}, 11);  // 5 tokens x top-2
  check_step<1040, 24, 2, 1, 0, 1, 8, 2, 1>({0, 1, 1}, 12);
  check_step<1056, 32, 2, 1, 1, 1, 8, 3, 0>({1, 0, 1, 1}, 13);
  check_step<1056, 32, 2, 1, 1, 1, 8, 3, 1>({1, 0, 1, 1}, 14);
}

// Fewer blocks per expert than row tiles: each block streams tiles x, x + grid.x, ... (ragged
// last tiles; with PF 1 the next tile's first chunk is loaded during the last chunk of this
// one), and still reads each chosen expert once per pair chunk.
TEST(MoeGroupedOnHost, BlocksStreamSeveralRowTiles) {
  check_step<75, 37, 4, 2, 0, 1, 3, 3, 0, 2>({0, 2, 1, 3, 2, 0, 3, 3, -1, 2}, 21);  // 5 and 9 tiles over 2 blocks
  check_step<1056, 64, 3, 2, 1, 2, 2, 2, 1, 3>({2, 0, 1, 2, 0, 1}, 22);  // INT4, 16 and 264 tiles over 3 blocks
  // Deeper rings (PF 2, 3): a block's steps are not a multiple of PF + 1, loads run ahead across tiles.
  check_step<75, 37, 4, 2, 0, 1, 3, 3, 2, 2>({0, 2, 1, 3, 2, 0, 3, 3, -1, 2}, 24);
  check_step<1040, 24, 2, 1, 0, 1, 2, 2, 3, 3>({0, 1, 1}, 25);
  check_step<1056, 64, 3, 2, 1, 2, 2, 2, 2, 3>({2, 0, 1, 2, 0, 1}, 26);
  check_step<1056, 64, 3, 2, 1, 2, 2, 2, 3, 1>({2, 0, 1, 2, 0, 1}, 27);
  std::map<std::pair<int, int64_t>, int64_t> reads;
  constexpr int H = 64, I = 32, E = 6;
  check_step<H, I, E, 2, 1, 1, 2, 2, 1, 3>({1, 4, 1, 2, 5, 2}, 23, &reads);  // 16 and 32 tiles over 3 blocks
  for (int64_t e = 0; e < E; ++e) {
    const bool chosen = e == 1 || e == 2 || e == 4 || e == 5;
    EXPECT_EQ((reads[{0, e}]), chosen ? I * H / 2 : 0) << "gate of expert " << e;
    EXPECT_EQ((reads[{2, e}]), chosen ? H * I / 2 : 0) << "down of expert " << e;
  }
}

// MMA 1's dequantisation (moe_dequant_bf16x2): every nibble value at every position of a word
// becomes bf16 (q - 8) exactly (MMA 3, 4: 128 + q), in the fragment order {n0, n4}, {n1, n5},
// {n2, n6}, {n3, n7} (nibbles 8..15 carry into bf16's exponent unless shifted to the low
// mantissa bits first).
TEST(MoeGroupedOnHost, MmaDequantIsBf16Exact) {
  for (unsigned v = 0; v < 16; ++v)
    for (unsigned pos = 0; pos < 8; ++pos) {
      const unsigned w = (v << (4 * pos)) | (0x9u << (4 * ((pos + 3) % 8)));  // another nibble beside it
      unsigned p[4], b[4];
      kp::moe_dequant_bf16x2(w, p);
      kp::moe_dequant_bf16x2<true>(w, b);
      for (unsigned j = 0; j < 8; ++j) {
        const unsigned word = p[j % 4] >> (16 * (j / 4)), biased = b[j % 4] >> (16 * (j / 4));  // nibble j: word j % 4, half j / 4
        const int q = static_cast<int>((w >> (4 * j)) & 15u) - 8;
        EXPECT_EQ(word & 0xffffu, float_to_bf16(static_cast<float>(q))) << "value " << v << " at " << pos << ", nibble " << j;
        EXPECT_EQ(biased & 0xffffu, float_to_bf16(static_cast<float>(q + 136))) << "value " << v << " at " << pos << ", nibble " << j;
      }
    }
}

// MoeXsTokens (a token's staged words as two bases) reads the slots moe_mma_xs_slot names: every
// token (both parities), group (a partial sub-block's included) and quad lane, hi and lo words,
// bf16-staged (XB 1, G rounded up to even a token) and hi + lo (XB 0).
template <int G, int XB>
void check_xs_token_slots() {
  constexpr int kTokens = 9;
  std::vector<uint4> xs(kTokens * (G + 1) * 4 * 2);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = uint4{static_cast<unsigned>(i), 0u, 0u, 0u};
  for (int t = 0; t < kTokens; ++t)
    for (int q = 0; q < 4; ++q) {
      const int tok[2] = {t, kTokens - 1 - t};  // two n-tiles' tokens, of either parity
      const kp::MoeXsTokens<G, XB, 2> xt(xs.data(), tok, q);
      for (int X = 0; X < G; ++X) {
        EXPECT_EQ(xt.hi(1, X).x, static_cast<unsigned>(kp::moe_mma_xs_slot<G, XB>(tok[1], X, q, 0))) << "G " << G << " XB " << XB << " t " << tok[1] << " X " << X;
        EXPECT_EQ(xt.hi(0, X).x, static_cast<unsigned>(kp::moe_mma_xs_slot<G, XB>(t, X, q, 0))) << "G " << G << " XB " << XB << " t " << t << " X " << X;
        if constexpr (!XB) {
          EXPECT_EQ(xt.lo(0, X).x, static_cast<unsigned>(kp::moe_mma_xs_slot<G>(t, X, q, 1))) << "G " << G << " t " << t << " X " << X;
          EXPECT_EQ(xt.lo(1, X).x, static_cast<unsigned>(kp::moe_mma_xs_slot<G>(tok[1], X, q, 1))) << "G " << G << " t " << tok[1] << " X " << X;
        }
      }
    }
}
TEST(MoeGroupedOnHost, XsTokenBasesReadTheStagedSlots) {
  check_xs_token_slots<33, 0>();
  check_xs_token_slots<33, 1>();
  check_xs_token_slots<224, 0>();
  check_xs_token_slots<224, 1>();
}

// MMA 1 against the CPU op: ragged row tiles (gate/up 5 warps x 8 rows over I = 96, down 5 x 16
// over H = 1056), H's 33 groups (a partial sub-block and step), pair chunks of every n-tile
// shape (NT 1, 3, 8, 9, 16: one and two n-tiles, columns past nt dropped), clamped ids, SwiGLU
// and routing weights, PF 0 to 3, two m-tiles a warp (ROWS 16 / 32), blocks streaming several
// tiles and chunks dealt over grid.z.
TEST(MoeGroupedOnHost, MmaMatchesTheCpuOp) {
  // 7 tokens x top-3 over 4 experts: expert 2 chosen by 7 pairs (+2 clamped from 9), 0 by 5
  // (-1 clamped), the others by the rest.
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 3, 1>(ids, 31);
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 8, 0>(ids, 32);
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 9, 1>(ids, 33);
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 1, 1>(ids, 34);
  check_step_mma<256, 64, 4, 3, 2, 16, 32, 16, 1, 1>(ids, 35);  // two m-tiles a warp, one block streams all tiles
  check_step_mma<256, 64, 4, 3, 2, 16, 32, 4, 0, 1, 2>(ids, 36);  // the same, PF 0, chunks over grid.z
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 3, 2>(ids, 38);          // PF 2 and 3: rings of 3 and 4 steps
  check_step_mma<1056, 96, 4, 3, 5, 8, 16, 9, 3, 1>(ids, 39);       // one block: the ring crosses every tile
  check_step_mma<256, 64, 4, 3, 2, 16, 32, 16, 2, 1, 2>(ids, 40);
  // 18 pairs on one expert: chunks of 16 + 2 (two n-tiles, then one).
  std::vector<int32_t> many(20 * 1, 1);
  many[5] = 3, many[11] = 0;
  check_step_mma<1056, 96, 4, 1, 3, 8, 16, 16, 1, 2>(many, 37);
}

// MMA 3 and 4 (weights as 128 + q, C = -136 x the group's activation sum) against the CPU op:
// ragged tiles and groups (H 1056: 33 groups, steps of 8), one and two n-tiles, two m-tiles a
// warp, a deeper ring.
TEST(MoeGroupedOnHost, MmaBiasFormsMatchTheCpuOp) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_step_mma_biased<1056, 96, 4, 3, 5, 8, 16, 3, 1>(ids, 61);
  check_step_mma_biased<1056, 96, 4, 3, 5, 8, 16, 9, 2, 1>(ids, 62);
  check_step_mma_biased<256, 64, 4, 3, 2, 16, 32, 16, 1, 1>(ids, 63);
}

TEST(MoeGroupedOnHost, MmaSmallShapesAtTheDefaultWarps) {
  const std::vector<int32_t> ids = {1, 4, 1, 2, 5, 2, 0, 3, 5};
  check_step_mma<64, 32, 6, 3, 16, 8, 16, 4, 1>(ids, 51);
  check_step_mma<64, 32, 6, 3, 8, 8, 16, 8, 1>(ids, 52);
  check_step_mma<96, 64, 6, 3, 16, 8, 16, 4, 1>(ids, 53);
  check_step_mma<96, 64, 6, 3, 8, 8, 16, 8, 1>(ids, 54);
}

// MMA 1 streams each chosen expert once per NT pairs, the others never (as MMA 0 does): 20
// tokens x top-1, 18 on expert 3: ceil(18 / 16) = 2 passes of NT 16, ceil(18 / 8) = 3 of NT 8.
TEST(MoeGroupedOnHost, MmaStreamsEachExpertOncePerNtPairs) {
  constexpr int H = 64, I = 32, E = 6;
  std::vector<int32_t> ids(20, 3);
  ids[4] = 1, ids[13] = 40;  // 40 -> 5
  for (int nt : {16, 8}) {
    std::map<std::pair<int, int64_t>, int64_t> reads;
    if (nt == 16)
      check_step_mma<H, I, E, 1, 1, 8, 16, 16, 1>(ids, 41, &reads);
    else
      check_step_mma<H, I, E, 1, 1, 8, 16, 8, 0, 2>(ids, 42, &reads);
    const int64_t passes = (18 + nt - 1) / nt;
    EXPECT_EQ((reads[{0, 3}]), passes * I * H / 2) << "NT " << nt;
    EXPECT_EQ((reads[{1, 3}]), passes * I * H / 2) << "NT " << nt;
    EXPECT_EQ((reads[{2, 3}]), passes * H * I / 2) << "NT " << nt;
    for (int64_t e : {1, 5}) {
      EXPECT_EQ((reads[{0, e}]), I * H / 2) << "expert " << e;
      EXPECT_EQ((reads[{2, e}]), H * I / 2) << "expert " << e;
    }
    for (int64_t e : {0, 2, 4}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 0) << "expert " << e;
  }
}

// W_LAYOUT 1 (the weights in ir/support/int4_frag.h's order, loaded straight into the fragments):
// every scale scheme and 128 + q form, one and two m-tiles a warp (steps of 256 and 128 columns),
// a reduction whose last 256-column step is half (H 384), ragged row tiles, one and two n-tiles,
// PF 0..2, several tiles a block: the CPU op's results, bit for bit the checkpoint layout's.
template <int H, int I, int E, int K, int WARPS, int GROWS, int DROWS, int NT, int PF, unsigned GX = 1u << 30, unsigned GZ = 1>
void check_frag(const std::vector<int32_t>& ids, uint64_t seed, bool biased = false) {
  auto both = [&]<int MMA>() {
    const std::vector<float> rows = check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, MMA, 0, 0>(ids, seed, nullptr, 1e-4);
    const std::vector<float> frag = check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, MMA, 0, 1>(ids, seed, nullptr, 1e-4);
    EXPECT_EQ(0, std::memcmp(rows.data(), frag.data(), 4 * rows.size())) << "MMA " << MMA << " H " << H << " I " << I;
  };
  both.template operator()<1>();
  both.template operator()<2>();
  if (!biased) return;
  both.template operator()<3>();
  both.template operator()<4>();
}

TEST(MoeGroupedOnHost, FragLayoutMatchesTheCpuOpBitForBit) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_frag<256, 128, 4, 3, 5, 8, 16, 3, 1>(ids, 81, /*biased=*/true);
  check_frag<384, 128, 4, 3, 3, 8, 16, 9, 2, 1>(ids, 82);       // H 384: down's steps 2 + a half; one block streams every tile
  check_frag<256, 128, 4, 3, 2, 16, 32, 16, 1, 1, 2>(ids, 83);  // two m-tiles a warp (128-column steps), chunks over grid.z
  check_frag<512, 256, 4, 3, 4, 8, 16, 4, 0>(ids, 84);
}

// W_LAYOUT 1 streams what the checkpoint layout streams: each chosen expert once per NT pairs.
TEST(MoeGroupedOnHost, FragLayoutStreamsEachExpertOncePerNtPairs) {
  constexpr int H = 256, I = 128, E = 6;
  std::vector<int32_t> ids(20, 3);
  ids[4] = 1, ids[13] = 40;  // 40 -> 5
  std::map<std::pair<int, int64_t>, int64_t> reads;
  check_step_with<H, I, E, 1, 1, 4, 8, 16, 8, 1, 1u << 30, 1, 2, 0, 1>(ids, 85, &reads, 1e-4);
  EXPECT_EQ((reads[{0, 3}]), 3 * I * H / 2);
  EXPECT_EQ((reads[{1, 3}]), 3 * I * H / 2);
  EXPECT_EQ((reads[{2, 3}]), 3 * H * I / 2);
  for (int64_t e : {1, 5}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 3 * I * H / 2) << "expert " << e;
  for (int64_t e : {0, 2, 4}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 0) << "expert " << e;
}

// XB 1 (activations rounded to bf16 once staged, one MMA a k-step, odd tokens' groups swapped):
// every MMA form on both layouts and the shared-memory ring, one and two m-tiles and n-tiles, an
// odd group count (H 224: 7 groups, their last pair's swap past G), a half last step, ragged
// tiles, chunks over grid.z: the bf16-staged reference to f32 summation order, while the same
// steps with XB 0 sit visibly further from it (the rounding is real, not a no-op).
template <int H, int I, int E, int K, int WARPS, int GROWS, int DROWS, int NT, int PF, unsigned GX = 1u << 30, unsigned GZ = 1, int W_LAYOUT = 0>
void check_bf16_staged(const std::vector<int32_t>& ids, uint64_t seed) {
  auto one = [&]<int MMA>() {
    const std::vector<float> xb = check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, MMA, 0, W_LAYOUT, 1>(ids, seed, nullptr, MMA >= 3 ? 3e-5 : 1e-5);
    const std::vector<float> split = check_step_with<H, I, E, K, 1, WARPS, GROWS, DROWS, NT, PF, GX, GZ, MMA, 0, W_LAYOUT, 0>(ids, seed, nullptr, 1e-4);
    EXPECT_GT(relative_error(split, xb), 1e-4) << "MMA " << MMA << " H " << H;
  };
  one.template operator()<1>();
  one.template operator()<2>();
  one.template operator()<3>();
  one.template operator()<4>();
}

TEST(MoeGroupedOnHost, Bf16StagedActivationsMatchTheirReference) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_bf16_staged<256, 128, 4, 3, 5, 8, 16, 3, 1>(ids, 91);
  check_bf16_staged<224, 96, 4, 3, 3, 8, 16, 9, 2, 1>(ids, 92);          // 7 and 3 groups: odd G; one block streams every tile
  check_bf16_staged<256, 128, 4, 3, 2, 16, 32, 16, 1, 1, 2>(ids, 93);    // two m-tiles a warp, chunks over grid.z
  check_bf16_staged<384, 128, 4, 3, 4, 8, 16, 4, 0, 1u << 30, 1, 1>(ids, 94);  // int4_frag order, a half last step
  check_step_with<512, 256, 4, 3, 1, 5, 8, 16, 9, 0, 1, 1, 2, 3, 0, 1>(ids, 95, nullptr, 1e-5);  // the shared-memory ring
}

// The shared-memory ring against the CPU op: ragged row tiles (gate/up 5 warps x 8 rows over
// I = 256, down 5 x 16 over H = 512), one and two n-tiles (NT 3, 9, 16), rings of 2 to 4 stages
// whose steps cross tile boundaries (a block streams several tiles: GX 1, 2), clamped ids,
// chunks over grid.z, and a reduction of one step (H or I = 256).
TEST(MoeGroupedOnHost, RingMatchesTheCpuOp) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_step_ring<512, 256, 4, 3, 5, 3, 2>(ids, 71);
  check_step_ring<512, 256, 4, 3, 5, 9, 3, 1>(ids, 72);
  check_step_ring<768, 256, 4, 3, 4, 16, 4, 2, 2>(ids, 73);
  check_step_ring<256, 512, 4, 3, 2, 4, 3, 1>(ids, 74);
}

// The shared-memory ring over int4_frag-ordered experts (W_LAYOUT 1: the lanes' own fragment words
// and the octets' scale runs copied by cp.async) against the CPU op: ragged tiles, the direct and
// shuffled scale paths (MMA 2, 1) and the bias path (MMA 4), one and two n-tiles, bf16-staged
// activations, rings of 2 to 4 stages across tile boundaries, chunks over grid.z.
TEST(MoeGroupedOnHost, FragRingMatchesTheCpuOp) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_step_with<512, 256, 4, 3, 1, 5, 8, 16, 3, 0, 2, 1, 2, 2, 1>(ids, 76, nullptr, 1e-4);
  check_step_with<512, 256, 4, 3, 1, 5, 8, 16, 9, 0, 1, 1, 1, 3, 1>(ids, 77, nullptr, 1e-4);
  check_step_with<768, 256, 4, 3, 1, 4, 8, 16, 16, 0, 2, 2, 4, 4, 1>(ids, 78, nullptr, 1e-4);
  check_step_with<256, 512, 4, 3, 1, 2, 8, 16, 4, 0, 1u << 30, 1, 2, 3, 1, 1>(ids, 79, nullptr, 1e-5);  // bf16-staged activations
}

// The int4_frag ring's copies by the copy engine (TMA 1: four cp.async.bulk runs a step onto the
// stage's mbarrier, RING stages in flight) against the CPU op: one block streaming every row tile
// (the ring wrapping across tiles), both scale schemes and the bias form, two n-tiles, chunks
// over grid.z, bf16-staged activations; and the same output as the cp.async ring bit for bit
// (the same math on the same bytes, only the stage's word order differs).
TEST(MoeGroupedOnHost, FragTmaRingMatchesTheCpuOp) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  const std::vector<float> tma = check_step_with<512, 256, 4, 3, 1, 2, 8, 16, 3, 0, 1, 1, 2, 2, 1, 0, 1>(ids, 86, nullptr, 1e-4);
  const std::vector<float> async = check_step_with<512, 256, 4, 3, 1, 2, 8, 16, 3, 0, 1, 1, 2, 2, 1, 0, 0>(ids, 86, nullptr, 1e-4);
  EXPECT_EQ(tma, async);
  check_step_with<512, 256, 4, 3, 1, 2, 8, 16, 9, 0, 4, 2, 1, 3, 1, 0, 1>(ids, 87, nullptr, 1e-4);
  check_step_with<768, 256, 4, 3, 1, 2, 8, 16, 16, 0, 2, 1, 4, 4, 1, 0, 1>(ids, 88, nullptr, 1e-4);
  check_step_with<256, 512, 4, 3, 1, 2, 8, 16, 4, 0, 1u << 30, 1, 2, 3, 1, 1, 1>(ids, 89, nullptr, 1e-5);  // bf16-staged activations
}

// Gate/up's K split (KS: WARPS / KS warps' rows a tile, each row's K in KS parts streamed by KS
// warps and added in part order) against the CPU op: two and four parts, one block over every
// tile (the parts' shared-memory hand-over reused tile after tile) and several, both scale
// schemes, two n-tiles, chunks over grid.z, bf16-staged activations.
TEST(MoeGroupedOnHost, GateUpKSplitMatchesTheCpuOp) {
  const std::vector<int32_t> ids = {2, 0, 1, 2, 3, 0, 2, 9, -1, 2, 1, 0, 2, 3, 0, 2, 1, 9, 2, 0, 3};
  check_step_with<512, 256, 4, 3, 1, 4, 8, 16, 3, 0, 1, 1, 2, 3, 1, 0, 1, 2>(ids, 91, nullptr, 1e-4);
  check_step_with<1024, 256, 4, 3, 1, 4, 8, 16, 9, 0, 4, 2, 1, 2, 1, 0, 1, 4>(ids, 92, nullptr, 1e-4);
  check_step_with<512, 256, 4, 3, 1, 4, 8, 16, 16, 0, 2, 1, 2, 2, 1, 0, 1, 2>(ids, 93, nullptr, 1e-4);
  check_step_with<512, 256, 4, 3, 1, 4, 8, 16, 4, 0, 1u << 30, 1, 2, 3, 1, 1, 1, 2>(ids, 94, nullptr, 1e-5);  // bf16-staged activations
}

// The copy engine's ring streams each chosen expert once per NT pairs too (the host shim counts
// each bulk copy's words), the others never.
TEST(MoeGroupedOnHost, FragTmaRingStreamsEachExpertOncePerNtPairs) {
  constexpr int H = 512, I = 256, E = 6;
  std::vector<int32_t> ids(20, 3);
  ids[4] = 1, ids[13] = 40;  // 40 -> 5
  std::map<std::pair<int, int64_t>, int64_t> reads;
  check_step_with<H, I, E, 1, 1, 2, 8, 16, 8, 0, 1u << 30, 1, 2, 3, 1, 0, 1>(ids, 90, &reads, 1e-4);
  const int64_t passes = (18 + 8 - 1) / 8;
  EXPECT_EQ((reads[{0, 3}]), passes * I * H / 2);
  EXPECT_EQ((reads[{1, 3}]), passes * I * H / 2);
  EXPECT_EQ((reads[{2, 3}]), passes * H * I / 2);
  for (int64_t e : {1, 5}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 3 * I * H / 2) << "expert " << e;
  for (int64_t e : {0, 2, 4}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 0) << "expert " << e;
}

// The ring streams each chosen expert once per NT pairs, the others never: every weight byte
// through cp.async (the host shim counts them as streamed), 18 pairs on expert 3 in 3 passes of
// NT 8.
TEST(MoeGroupedOnHost, RingStreamsEachExpertOncePerNtPairs) {
  constexpr int H = 512, I = 256, E = 6;
  std::vector<int32_t> ids(20, 3);
  ids[4] = 1, ids[13] = 40;  // 40 -> 5
  std::map<std::pair<int, int64_t>, int64_t> reads;
  check_step_ring<H, I, E, 1, 2, 8, 3, 1>(ids, 75, &reads);
  const int64_t passes = (18 + 8 - 1) / 8;
  EXPECT_EQ((reads[{0, 3}]), passes * I * H / 2);
  EXPECT_EQ((reads[{1, 3}]), passes * I * H / 2);
  EXPECT_EQ((reads[{2, 3}]), passes * H * I / 2);
  for (int64_t e : {1, 5}) {
    EXPECT_EQ((reads[{0, e}]), I * H / 2) << "expert " << e;
    EXPECT_EQ((reads[{2, e}]), H * I / 2) << "expert " << e;
  }
  for (int64_t e : {0, 2, 4}) EXPECT_EQ((reads[{0, e}]) + (reads[{1, e}]) + (reads[{2, e}]), 0) << "expert " << e;
}

// The router folded into gate/up (ROUTE: router_experts.h): every block routes the step's tokens
// from the logits, a warp a token (tokens past the block's warps in further passes), and block
// (0, 0, 0) alone writes the ids and weights the down projection reads. Both equal the CPU
// router's, and the step equals the CPU router + experts, on the CUDA-core and tensor-core paths.
template <int H, int I, int E, int K, int W_FMT, int WARPS, int GROWS, int DROWS, int NT, int MMA, int ROUTE>
void check_routed_step(int T, uint64_t seed) {
  const Stack g = make_stack(E, I, H, W_FMT, seed), u = make_stack(E, I, H, W_FMT, seed + 1), d = make_stack(E, H, I, W_FMT, seed + 2);
  const std::vector<float> logits = testing_util::xorshift_uniform(static_cast<size_t>(T) * E, seed + 3, 4.f);
  const std::vector<float> bias = testing_util::xorshift_uniform(E, seed + 4, 0.5f);
  const std::vector<float> x = testing_util::xorshift_uniform(static_cast<size_t>(T) * H, seed + 5, 1.f);
  const float scaling = 2.5f;
  std::vector<int32_t> ids(static_cast<size_t>(T) * K, -1);
  std::vector<float> weights(static_cast<size_t>(T) * K, NAN), h(static_cast<size_t>(T) * K * I, NAN);
  std::vector<float> partial(static_cast<size_t>(T) * K * H, NAN), out(static_cast<size_t>(T) * H, 0.f);
  const unsigned slots = static_cast<unsigned>(std::min(E, T * K));
  const unsigned gu_tiles = (I + WARPS * GROWS - 1) / (WARPS * GROWS), dn_tiles = (H + WARPS * DROWS - 1) / (WARPS * DROWS);
  cuda_host::launch(gu_tiles, slots, 32 * WARPS, [&] {
    kp::moe_grouped_gate_up<H, I, E, K, W_FMT, kp::F32, WARPS, GROWS, NT, 0, 1, MMA, 0, ROUTE, 1>(
        x.data(), ids.data(), g.w(), g.scale.data(), u.w(), u.scale.data(), h.data(), T, H, logits.data(), bias.data(), weights.data(),
        scaling);
  }, moe_smem_bytes(H, NT, MMA, WARPS, 0));
  Matrix l(T, E);
  l.data = logits;
  const cpu::Routing want = cpu::moe_route_logits(l, bias, cpu::RouterParams{E, K, 1, 1, true, scaling});
  const std::string what = "W_FMT " + std::to_string(W_FMT) + " MMA " + std::to_string(MMA) + " tokens " + std::to_string(T);
  EXPECT_EQ(ids, want.experts) << what;
  EXPECT_LT(relative_error(weights, want.weights), 1e-6) << what;
  cuda_host::launch(dn_tiles, slots, 32 * WARPS, [&] {
    kp::moe_grouped_down<H, I, E, K, W_FMT, WARPS, DROWS, NT, 0, 1, MMA, 0>(h.data(), ids.data(), weights.data(), d.w(), d.scale.data(),
                                                                           partial.data(), T);
  }, moe_smem_bytes(I, NT, MMA, WARPS, 0));
  cuda_host::launch((H + 31) / 32, T, 32, [&] { kp::moe_combine<H, K, kp::F32, 0, 32>(partial.data(), out.data(), out.data(), T, H); });
  std::vector<cpu::ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e)
    experts.push_back({g.values.data() + e * I * H, u.values.data() + e * I * H, d.values.data() + e * H * I, I});
  Matrix xm(T, H);
  xm.data = x;
  EXPECT_LT(relative_error(out, cpu::moe_experts(xm, want, experts).data), MMA ? 1e-4 : 1e-5) << what;
}

TEST(MoeGroupedOnHost, RoutedGateUpMatchesTheCpuRouterAndOp) {
  check_routed_step<64, 32, 40, 4, 0, 2, 2, 2, 2, 0, 8>(1, 31);    // bf16, one token
  check_routed_step<64, 32, 40, 4, 1, 2, 2, 2, 3, 0, 8>(5, 32);    // INT4, 5 tokens over 2 warps (3 passes)
  check_routed_step<256, 64, 96, 8, 1, 2, 8, 16, 4, 2, 16>(7, 33);  // the tensor-core path, 96 experts (3 a lane)
}

}  // namespace
}  // namespace kplan::codegen
