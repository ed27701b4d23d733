#include "runtime/cpu/dflash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/support/error.h"

namespace kplan::cpu {

Matrix gqa_attention_full(const Matrix& q, const Matrix& k, const Matrix& v, int64_t q_heads,
                          int64_t kv_heads, int64_t head_dim, float scale, int64_t context_window) {
  if (kv_heads <= 0 || q_heads % kv_heads != 0)
    throw Error("gqa attention: " + std::to_string(q_heads) + " query heads do not group over " +
                std::to_string(kv_heads) + " kv heads");
  if (q.cols != q_heads * head_dim || k.cols != kv_heads * head_dim || v.cols != k.cols ||
      v.rows != k.rows)
    throw Error("gqa attention: q/k/v shapes do not match the head layout");
  const int64_t group = q_heads / kv_heads;
  const int64_t S = k.rows;
  if (context_window < 0) throw Error("gqa attention: context_window " + std::to_string(context_window) + " is negative");
  if (context_window > 0 && S < q.rows)
    throw Error("gqa attention: a context window needs the " + std::to_string(q.rows) +
                " queries' own rows among the " + std::to_string(S) + " keys");
  // The first key seen: the window's start in the context (the own rows are always seen).
  const int64_t first = context_window > 0 ? std::max<int64_t>(0, S - q.rows - context_window) : 0;
  Matrix out(q.rows, q.cols);
  std::vector<double> p(static_cast<size_t>(S));
  std::vector<double> acc(static_cast<size_t>(head_dim));
  for (int64_t t = 0; t < q.rows; ++t) {
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t kh = h / group;
      const float* qh = q.row(t) + h * head_dim;
      double max_score = -std::numeric_limits<double>::infinity();
      for (int64_t s = first; s < S; ++s) {
        const float* ks = k.row(s) + kh * head_dim;
        double dot = 0.0;
        for (int64_t i = 0; i < head_dim; ++i) dot += static_cast<double>(qh[i]) * ks[i];
        p[s] = dot * scale;
        max_score = std::max(max_score, p[s]);
      }
      double sum = 0.0;
      for (int64_t s = first; s < S; ++s) sum += (p[s] = std::exp(p[s] - max_score));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t s = first; s < S; ++s) {
        const float* vs = v.row(s) + kh * head_dim;
        for (int64_t i = 0; i < head_dim; ++i) acc[i] += p[s] / sum * vs[i];
      }
      float* o = out.row(t) + h * head_dim;
      for (int64_t i = 0; i < head_dim; ++i) o[i] = static_cast<float>(acc[i]);
    }
  }
  return out;
}

}  // namespace kplan::cpu
