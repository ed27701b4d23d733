// Op-level checks of the CPU reference against hand-computed and brute-force values.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ir/support/error.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_attention.h"
#include "runtime/cpu/mla_attention.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/step_mask.h"
#include "tests/unit/cpu/cpu_test_util.h"

namespace kplan::cpu {
namespace {

using cpu_test::random_matrix;
using cpu_test::relative_error;

TEST(CpuOps, RmsNormByHand) {
  Matrix x(1, 4);
  x.data = {1.0f, 2.0f, 3.0f, 4.0f};  // mean of squares 7.5
  std::vector<float> w = {1.0f, 0.5f, 2.0f, -1.0f};
  Matrix y = rms_norm(x, w, 0.5f);  // rsqrt(8) = 0.35355339
  const float r = 1.0f / std::sqrt(8.0f);
  EXPECT_NEAR(y.data[0], 1.0f * r, 1e-7);
  EXPECT_NEAR(y.data[1], 0.5f * 2.0f * r, 1e-7);
  EXPECT_NEAR(y.data[2], 2.0f * 3.0f * r, 1e-6);
  EXPECT_NEAR(y.data[3], -4.0f * r, 1e-6);
}

TEST(CpuOps, MatmulIsXTimesWTransposed) {
  Matrix x(2, 3), w(2, 3);
  x.data = {1, 2, 3, 4, 5, 6};
  w.data = {1, 0, -1, 2, 1, 0};
  Matrix y = matmul(x, w);
  ASSERT_EQ(y.rows, 2);
  ASSERT_EQ(y.cols, 2);
  EXPECT_EQ(y.data, (std::vector<float>{-2, 4, -2, 13}));
  EXPECT_THROW(matmul(x, Matrix(2, 4)), Error);
}

TEST(CpuOps, SoftmaxLogSoftmaxArgmaxTopK) {
  std::vector<float> v = {1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<float> p = v;
  softmax_inplace(p.data(), 4);
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(p[1], std::exp(3.0) / z, 1e-7);
  std::vector<float> lp = v;
  log_softmax_inplace(lp.data(), 4);
  EXPECT_NEAR(lp[0], 1.0 - std::log(z), 1e-6);
  EXPECT_EQ(argmax(v.data(), 4), 1);  // first of the tied maxima
  EXPECT_EQ(top_k(v.data(), 4, 3), (std::vector<int64_t>{1, 3, 2}));
}

TEST(CpuOps, EmbeddingRejectsIdsOutsideVocab) {
  Matrix table(4, 2);
  std::vector<int32_t> ok = {3, 0}, bad = {4};
  EXPECT_EQ(embedding(table, ok).rows, 2);
  EXPECT_THROW(embedding(table, bad), Error);
}

// transformers' rope_interleave path: de-interleave to [evens | odds], then rotate_half with
// cos/sin = cat(freqs, freqs). Our in-place GPT-J rotation must equal it up to that permutation.
TEST(CpuOps, InterleavedRopeEqualsTransformersDeinterleavePath) {
  const int64_t dim = 16;
  Rope rope(dim, 10000.0, RopeScaling{}, 512);
  std::mt19937 rng(3);
  Matrix x = random_matrix(1, dim, rng);
  for (int64_t pos : {0, 1, 7, 300}) {
    std::vector<float> ours(x.data);
    rope.apply_interleaved(ours.data(), pos);
    std::vector<float> hf(dim);
    for (int64_t i = 0; i < dim / 2; ++i) {
      hf[i] = x.data[2 * i];
      hf[i + dim / 2] = x.data[2 * i + 1];
    }
    rope.apply_rotate_half(hf.data(), pos);
    for (int64_t i = 0; i < dim / 2; ++i) {
      EXPECT_FLOAT_EQ(ours[2 * i], hf[i]) << "pos " << pos << " pair " << i;
      EXPECT_FLOAT_EQ(ours[2 * i + 1], hf[i + dim / 2]) << "pos " << pos << " pair " << i;
    }
  }
}

TEST(CpuOps, PlainRopeRotatesByPositionTimesInverseFrequency) {
  Rope rope(4, 100.0, RopeScaling{}, 512);
  ASSERT_EQ(rope.inv_freq().size(), 2u);
  EXPECT_FLOAT_EQ(rope.inv_freq()[0], 1.0f);
  EXPECT_FLOAT_EQ(rope.inv_freq()[1], 0.1f);  // 1 / 100^(2/4)
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f};  // rotate_half pairs (x0, x2), (x1, x3)
  rope.apply_rotate_half(x.data(), 3);
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[2], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[1], -std::sin(0.3), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.3), 1e-6);
}

// tiny-yarn's numbers: dim 16, theta 1e4, factor 4, original 128, beta 32/1. By hand:
// corr(32) = 16 ln(128 / 64π) / (2 ln 1e4) = -0.39 -> low 0; corr(1) = 2.62 -> high 3, so the
// extrapolation share is 1, 2/3, 1/3, then 0 for lanes 3..7.
TEST(CpuOps, YarnInverseFrequenciesByHand) {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 4.0;
  s.original_max_position_embeddings = 128;
  s.beta_fast = 32;
  s.beta_slow = 1;
  s.mscale = 1;
  s.mscale_all_dim = 1;
  Rope rope(16, 10000.0, s, 512);
  const double extra[8] = {1.0, 2.0 / 3.0, 1.0 / 3.0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 8; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / 16.0);
    const double want = base * extra[i] + base / 4.0 * (1.0 - extra[i]);
    EXPECT_NEAR(rope.inv_freq()[i], want, want * 2e-6) << "lane " << i;
  }
  EXPECT_FLOAT_EQ(rope.attention_factor(), 1.0f);  // mscale == mscale_all_dim
  s.mscale_all_dim = 0;                             // then 0.1 ln(4) + 1
  EXPECT_NEAR(Rope(16, 10000.0, s, 512).attention_factor(), 0.1 * std::log(4.0) + 1.0, 1e-6);
}

TEST(CpuOps, StepMaskCausalAndPacked) {
  std::vector<uint32_t> none;
  EXPECT_TRUE(step_mask_allows(none, 3, 2, 1));
  EXPECT_FALSE(step_mask_allows(none, 3, 1, 2));
  // 40 tokens: row 35 may attend 0 and 33 (second word bit 1) only.
  std::vector<uint32_t> mask(40 * 2, 0);
  mask[35 * 2 + 0] = 1u;
  mask[35 * 2 + 1] = 1u << 1;
  EXPECT_TRUE(step_mask_allows(mask, 40, 35, 0));
  EXPECT_TRUE(step_mask_allows(mask, 40, 35, 33));
  EXPECT_FALSE(step_mask_allows(mask, 40, 35, 35));
}

// Absorbed MLA must equal the naive form that expands kv_b_proj into per-head keys and values.
TEST(CpuOps, AbsorbedMlaEqualsNaiveExpandedMla) {
  MlaDims d{3, 8, 5, 4, 6};
  const int64_t committed = 4, T = 3, N = committed + T;
  std::mt19937 rng(7);
  Matrix kv_b = random_matrix(d.heads * (d.nope + d.v), d.kv_lora, rng, 0.5f);
  Matrix q_nope = random_matrix(T, d.heads * d.nope, rng);
  Matrix q_rope = random_matrix(T, d.heads * d.rope, rng);
  Matrix latent = random_matrix(N + 2, d.kv_lora, rng);  // spare rows beyond N are ignored
  Matrix k_rope = random_matrix(N + 2, d.rope, rng);
  // Tree: 0 is the root, 1 and 2 its children (siblings must not see each other).
  std::vector<uint32_t> mask = {0b001, 0b011, 0b101};
  const float scale = 0.3f;
  Matrix got = mla_expand_value(
      mla_attention_absorbed(mla_absorb_query(q_nope, kv_b, d), q_rope, latent, k_rope, committed,
                             mask, d, scale),
      kv_b, d);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < d.heads; ++h) {
      std::vector<double> p;
      std::vector<int64_t> keys;
      for (int64_t s = 0; s < N; ++s) {
        if (s >= committed && !((mask[t] >> (s - committed)) & 1u)) continue;
        double score = 0.0;
        for (int64_t n = 0; n < d.nope; ++n) {
          double k = 0.0;  // k_nope[s][h][n] = kv_b[h*(nope+v)+n] . c_s
          for (int64_t c = 0; c < d.kv_lora; ++c) k += kv_b.row(h * (d.nope + d.v) + n)[c] * latent.row(s)[c];
          score += q_nope.row(t)[h * d.nope + n] * k;
        }
        for (int64_t r = 0; r < d.rope; ++r) score += q_rope.row(t)[h * d.rope + r] * k_rope.row(s)[r];
        p.push_back(std::exp(score * scale));
        keys.push_back(s);
      }
      double z = 0.0;
      for (double v : p) z += v;
      for (int64_t j = 0; j < d.v; ++j) {
        double want = 0.0;
        for (size_t i = 0; i < keys.size(); ++i) {
          double v = 0.0;
          for (int64_t c = 0; c < d.kv_lora; ++c)
            v += kv_b.row(h * (d.nope + d.v) + d.nope + j)[c] * latent.row(keys[i])[c];
          want += p[i] / z * v;
        }
        EXPECT_NEAR(got.row(t)[h * d.v + j], want, 1e-4 * (1.0 + std::abs(want)))
            << "token " << t << " head " << h << " lane " << j;
      }
    }
  }
}

TEST(CpuOps, RouterNormalisesUnbiasedScoresAndScales) {
  // gate = identity, so router logits = x.
  const int64_t E = 4;
  Matrix gate(E, E);
  for (int64_t e = 0; e < E; ++e) gate.row(e)[e] = 1.0f;
  Matrix x(1, E);
  x.data = {0.0f, 2.0f, -1.0f, 1.0f};
  std::vector<float> bias = {0.0f, 0.0f, 5.0f, 0.0f};  // bias picks expert 2 despite its score
  RouterParams p{E, 2, 1, 1, true, 2.5f};
  Routing r = moe_route(x, gate, bias, p);
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  ASSERT_EQ(r.experts, (std::vector<int32_t>{2, 1}));
  const double s2 = sig(-1.0), s1 = sig(2.0);
  EXPECT_NEAR(r.weights[0], s2 / (s1 + s2) * 2.5, 1e-6);
  EXPECT_NEAR(r.weights[1], s1 / (s1 + s2) * 2.5, 1e-6);
  p.norm_topk_prob = false;  // still scaled
  r = moe_route(x, gate, bias, p);
  EXPECT_NEAR(r.weights[0], s2 * 2.5, 1e-6);
}

TEST(CpuOps, RouterGroupLimitMasksOtherGroupsWithZero) {
  // 4 groups of 2; top-2 groups by (sum of their two best biased scores).
  const int64_t E = 8;
  Matrix gate(E, E);
  for (int64_t e = 0; e < E; ++e) gate.row(e)[e] = 1.0f;
  Matrix x(1, E);
  x.data = {3.0f, 3.0f, -3.0f, -3.0f, 2.0f, 2.0f, 4.0f, -4.0f};
  std::vector<float> bias(E, 0.0f);
  RouterParams p{E, 3, 4, 2, true, 1.0f};
  Routing r = moe_route(x, gate, bias, p);
  // Group sums: g0 2*s(3), g1 2*s(-3), g2 2*s(2), g3 s(4)+s(-4) = 1. Kept: g0 and g2.
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1, 4}));
  // With every biased score negative, transformers' masked_fill(0.0) makes the masked experts
  // (score 0) beat the kept ones; we reproduce that, lower index first on ties.
  std::fill(bias.begin(), bias.end(), -2.0f);
  r = moe_route(x, gate, bias, p);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{2, 3, 6}));
}

TEST(CpuOps, MoeExpertsWeightedSum) {
  std::mt19937 rng(11);
  const int64_t H = 6, I = 4, E = 3;
  std::vector<Matrix> g, u, dn;
  for (int64_t e = 0; e < E; ++e) {
    g.push_back(random_matrix(I, H, rng));
    u.push_back(random_matrix(I, H, rng));
    dn.push_back(random_matrix(H, I, rng));
  }
  std::vector<ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e) experts.push_back({g[e].data.data(), u[e].data.data(), dn[e].data.data(), I});
  Matrix x = random_matrix(2, H, rng);
  Routing r;
  r.top_k = 2;
  r.experts = {2, 0, 1, 2};
  r.weights = {0.25f, 1.5f, -1.0f, 2.0f};
  Matrix y = moe_experts(x, r, experts);
  for (int64_t t = 0; t < 2; ++t) {
    Matrix xt(1, H);
    std::copy_n(x.row(t), H, xt.row(0));
    Matrix want(1, H);
    for (int k = 0; k < 2; ++k) {
      const int e = r.experts[t * 2 + k];
      Matrix ye = swiglu_mlp(xt, g[e], u[e], dn[e]);
      for (int64_t c = 0; c < H; ++c) want.row(0)[c] += r.weights[t * 2 + k] * ye.row(0)[c];
    }
    EXPECT_LT(relative_error(y.row(t), want.row(0), H), 1e-6);
  }
}

TEST(CpuOps, GqaAttentionFullByBruteForce) {
  std::mt19937 rng(5);
  const int64_t Hq = 4, Hkv = 2, D = 3, T = 2, S = 5;
  Matrix q = random_matrix(T, Hq * D, rng), k = random_matrix(S, Hkv * D, rng),
         v = random_matrix(S, Hkv * D, rng);
  Matrix y = gqa_attention_full(q, k, v, Hq, Hkv, D, 0.5f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / 2;
      std::vector<double> p(S);
      double z = 0.0;
      for (int64_t s = 0; s < S; ++s) {
        double dot = 0.0;
        for (int64_t i = 0; i < D; ++i) dot += q.row(t)[h * D + i] * k.row(s)[g * D + i];
        z += (p[s] = std::exp(0.5 * dot));
      }
      for (int64_t i = 0; i < D; ++i) {
        double want = 0.0;
        for (int64_t s = 0; s < S; ++s) want += p[s] / z * v.row(s)[g * D + i];
        EXPECT_NEAR(y.row(t)[h * D + i], want, 1e-5);
      }
    }
  EXPECT_THROW(gqa_attention_full(q, k, v, 3, 2, D, 0.5f), Error);
}

// The drafter context window (OPS gqa_attention {context_window}): with keys [context C ; own T]
// the window N sees keys j >= max(0, C - N) only — the same as attention over those keys alone —
// and N >= C (or 0) is the full attention bit for bit.
TEST(CpuOps, GqaAttentionContextWindow) {
  std::mt19937 rng(11);
  const int64_t Hq = 4, Hkv = 2, D = 3, T = 2, C = 6, S = C + T;
  Matrix q = random_matrix(T, Hq * D, rng), k = random_matrix(S, Hkv * D, rng), v = random_matrix(S, Hkv * D, rng);
  const Matrix full = gqa_attention_full(q, k, v, Hq, Hkv, D, 0.5f);
  for (int64_t n : {C, C + 1, int64_t{1000}}) EXPECT_EQ(gqa_attention_full(q, k, v, Hq, Hkv, D, 0.5f, n).data, full.data) << n;
  for (int64_t n : {int64_t{1}, int64_t{4}}) {
    const int64_t first = C - n;
    Matrix ks(S - first, Hkv * D), vs(S - first, Hkv * D);
    for (int64_t s = first; s < S; ++s) {
      std::copy_n(k.row(s), Hkv * D, ks.row(s - first));
      std::copy_n(v.row(s), Hkv * D, vs.row(s - first));
    }
    const Matrix got = gqa_attention_full(q, k, v, Hq, Hkv, D, 0.5f, n);
    EXPECT_EQ(got.data, gqa_attention_full(q, ks, vs, Hq, Hkv, D, 0.5f).data) << n;
    EXPECT_NE(got.data, full.data) << n;
  }
  EXPECT_THROW(gqa_attention_full(q, k, v, Hq, Hkv, D, 0.5f, -1), Error);
  Matrix few = random_matrix(1, Hkv * D, rng);  // fewer keys than the queries' own rows
  EXPECT_THROW(gqa_attention_full(q, few, few, Hq, Hkv, D, 0.5f, 2), Error);
}

}  // namespace
}  // namespace kplan::cpu
