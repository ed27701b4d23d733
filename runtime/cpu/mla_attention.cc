#include "runtime/cpu/mla_attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/step_mask.h"

namespace kplan::cpu {

namespace {
void check_kv_b(const Matrix& kv_b, const MlaDims& d) {
  if (kv_b.rows != d.heads * (d.nope + d.v) || kv_b.cols != d.kv_lora)
    throw Error("mla: kv_b_proj is [" + std::to_string(kv_b.rows) + ", " +
                std::to_string(kv_b.cols) + "], expected [" +
                std::to_string(d.heads * (d.nope + d.v)) + ", " + std::to_string(d.kv_lora) + "]");
}
}  // namespace

Matrix mla_absorb_query(const Matrix& q_nope, const Matrix& kv_b, const MlaDims& d) {
  check_kv_b(kv_b, d);
  Matrix out(q_nope.rows, d.heads * d.kv_lora);
  std::vector<double> acc(static_cast<size_t>(d.kv_lora));
  for (int64_t t = 0; t < q_nope.rows; ++t) {
    for (int64_t h = 0; h < d.heads; ++h) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* q = q_nope.row(t) + h * d.nope;
      for (int64_t n = 0; n < d.nope; ++n) {
        const float* w = kv_b.row(h * (d.nope + d.v) + n);
        for (int64_t c = 0; c < d.kv_lora; ++c) acc[c] += static_cast<double>(q[n]) * w[c];
      }
      float* o = out.row(t) + h * d.kv_lora;
      for (int64_t c = 0; c < d.kv_lora; ++c) o[c] = static_cast<float>(acc[c]);
    }
  }
  return out;
}

Matrix mla_expand_value(const Matrix& o_latent, const Matrix& kv_b, const MlaDims& d) {
  check_kv_b(kv_b, d);
  Matrix out(o_latent.rows, d.heads * d.v);
  for (int64_t t = 0; t < o_latent.rows; ++t) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* o = o_latent.row(t) + h * d.kv_lora;
      for (int64_t j = 0; j < d.v; ++j) {
        const float* w = kv_b.row(h * (d.nope + d.v) + d.nope + j);
        double acc = 0.0;
        for (int64_t c = 0; c < d.kv_lora; ++c) acc += static_cast<double>(w[c]) * o[c];
        out.row(t)[h * d.v + j] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

Matrix mla_attention_absorbed(const Matrix& q_latent, const Matrix& q_rope, const Matrix& latent,
                              const Matrix& k_rope, int64_t committed,
                              std::span<const uint32_t> mask, const MlaDims& d, float scale) {
  const int64_t T = q_latent.rows;
  const int64_t keys = committed + T;
  if (latent.rows < keys || k_rope.rows < keys)
    throw Error("mla: cache holds fewer rows than committed + step tokens");
  if (!mask.empty() && static_cast<int64_t>(mask.size()) != T * mask_words(T))
    throw Error("mla: tree mask has " + std::to_string(mask.size()) + " words, expected " +
                std::to_string(T * mask_words(T)));
  Matrix out(T, d.heads * d.kv_lora);
  std::vector<double> scores(static_cast<size_t>(keys));
  std::vector<double> acc(static_cast<size_t>(d.kv_lora));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const float* ql = q_latent.row(t) + h * d.kv_lora;
      const float* qr = q_rope.row(t) + h * d.rope;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t s = 0; s < keys; ++s) {
        if (s >= committed && !step_mask_allows(mask, T, t, s - committed)) {
          scores[s] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double dot = 0.0;
        const float* c = latent.row(s);
        for (int64_t i = 0; i < d.kv_lora; ++i) dot += static_cast<double>(ql[i]) * c[i];
        const float* kr = k_rope.row(s);
        for (int64_t i = 0; i < d.rope; ++i) dot += static_cast<double>(qr[i]) * kr[i];
        scores[s] = dot * scale;
        max_score = std::max(max_score, scores[s]);
      }
      double sum = 0.0;
      for (int64_t s = 0; s < keys; ++s) {
        scores[s] = std::isinf(scores[s]) ? 0.0 : std::exp(scores[s] - max_score);
        sum += scores[s];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t s = 0; s < keys; ++s) {
        if (scores[s] == 0.0) continue;
        const double p = scores[s] / sum;
        const float* c = latent.row(s);
        for (int64_t i = 0; i < d.kv_lora; ++i) acc[i] += p * c[i];
      }
      float* o = out.row(t) + h * d.kv_lora;
      for (int64_t i = 0; i < d.kv_lora; ++i) o[i] = static_cast<float>(acc[i]);
    }
  }
  return out;
}

}  // namespace kplan::cpu
