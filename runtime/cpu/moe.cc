#include "runtime/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ir/support/error.h"
#include "runtime/cpu/basic_ops.h"

namespace kplan::cpu {

Routing moe_route(const Matrix& x, const Matrix& gate, std::span<const float> bias,
                  const RouterParams& p) {
  if (gate.rows != p.n_experts)
    throw Error("moe router: gate does not have " + std::to_string(p.n_experts) + " experts");
  return moe_route_logits(matmul(x, gate), bias, p);
}

Routing moe_route_logits(const Matrix& router_logits, std::span<const float> bias,
                         const RouterParams& p) {
  const int64_t E = p.n_experts;
  if (router_logits.cols != E || static_cast<int64_t>(bias.size()) != E)
    throw Error("moe router: logits or correction bias do not have " + std::to_string(E) + " experts");
  if (p.n_group <= 0 || E % p.n_group != 0 || p.topk_group > p.n_group || p.top_k > E)
    throw Error("moe router: bad grouping (n_group " + std::to_string(p.n_group) + ", topk_group " +
                std::to_string(p.topk_group) + ", top_k " + std::to_string(p.top_k) + ")");
  const int64_t per_group = E / p.n_group;
  Routing r;
  r.top_k = p.top_k;
  const int64_t T = router_logits.rows;
  r.experts.resize(static_cast<size_t>(T * p.top_k));
  r.weights.resize(static_cast<size_t>(T * p.top_k));
  r.margins.assign(static_cast<size_t>(T), std::numeric_limits<float>::infinity());
  std::vector<float> scores(static_cast<size_t>(E)), choice(E), group_score(p.n_group);
  for (int64_t t = 0; t < T; ++t) {
    const float* logits = router_logits.row(t);
    for (int64_t e = 0; e < E; ++e) {
      scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
      choice[e] = scores[e] + bias[e];
    }
    // Group score: sum of the two best biased scores in the group (one when a group has one).
    for (int64_t g = 0; g < p.n_group; ++g) {
      auto best = top_k(choice.data() + g * per_group, per_group, std::min<int64_t>(2, per_group));
      float s = 0.0f;
      for (int64_t i : best) s += choice[g * per_group + i];
      group_score[g] = s;
    }
    auto groups = top_k(group_score.data(), p.n_group, p.topk_group);
    std::vector<bool> kept(static_cast<size_t>(p.n_group), false);
    for (int64_t g : groups) kept[g] = true;
    for (int64_t e = 0; e < E; ++e)
      if (!kept[e / per_group]) choice[e] = 0.0f;  // transformers: masked_fill(..., 0.0)
    auto chosen = top_k(choice.data(), E, p.top_k);
    std::vector<bool> picked(static_cast<size_t>(E), false);
    for (int64_t k = 0; k < p.top_k; ++k) picked[chosen[k]] = true;
    for (int64_t e = 0; e < E; ++e)
      if (!picked[e] && kept[e / per_group]) r.margins[t] = std::min(r.margins[t], choice[chosen[p.top_k - 1]] - choice[e]);
    double sum = 0.0;
    for (int64_t k = 0; k < p.top_k; ++k) sum += scores[chosen[k]];
    for (int64_t k = 0; k < p.top_k; ++k) {
      float w = scores[chosen[k]];
      if (p.norm_topk_prob) w = static_cast<float>(w / (sum + 1e-20));
      r.experts[t * p.top_k + k] = static_cast<int32_t>(chosen[k]);
      r.weights[t * p.top_k + k] = w * p.routed_scaling_factor;
    }
  }
  return r;
}

Matrix moe_experts(const Matrix& x, const Routing& routing,
                   const std::vector<ExpertWeights>& experts) {
  Matrix out(x.rows, x.cols);
  for (int64_t e = 0; e < static_cast<int64_t>(experts.size()); ++e) {
    // The tokens routed to expert e, and their weights.
    std::vector<int64_t> tokens;
    std::vector<float> weights;
    for (int64_t t = 0; t < x.rows; ++t)
      for (int64_t k = 0; k < routing.top_k; ++k)
        if (routing.experts[t * routing.top_k + k] == e) {
          tokens.push_back(t);
          weights.push_back(routing.weights[t * routing.top_k + k]);
        }
    if (tokens.empty()) continue;
    const ExpertWeights& w = experts[e];
    std::vector<float> g(static_cast<size_t>(w.inter)), u(g.size()), y(static_cast<size_t>(x.cols));
    for (size_t i = 0; i < tokens.size(); ++i) {
      matvec(x.row(tokens[i]), w.gate, w.inter, x.cols, g.data());
      matvec(x.row(tokens[i]), w.up, w.inter, x.cols, u.data());
      for (int64_t j = 0; j < w.inter; ++j) g[j] = silu(g[j]) * u[j];
      matvec(g.data(), w.down, x.cols, w.inter, y.data());
      for (int64_t c = 0; c < x.cols; ++c) out.row(tokens[i])[c] += y[c] * weights[i];
    }
  }
  return out;
}

namespace {
const ExpertWeights& routed_expert(const Routing& r, const std::vector<ExpertWeights>& experts, size_t slot) {
  const int32_t e = r.experts[slot];
  if (e < 0 || e >= static_cast<int32_t>(experts.size()))
    throw Error("moe: expert id " + std::to_string(e) + " outside [0, " + std::to_string(experts.size()) + ")");
  return experts[static_cast<size_t>(e)];
}
}  // namespace

Matrix moe_expert_hidden(const Matrix& x, const Routing& routing,
                         const std::vector<ExpertWeights>& experts) {
  const int64_t inter = experts.empty() ? 0 : experts[0].inter;
  Matrix h(x.rows * routing.top_k, inter);
  std::vector<float> u(static_cast<size_t>(inter));
  for (int64_t t = 0; t < x.rows; ++t)
    for (int64_t j = 0; j < routing.top_k; ++j) {
      const ExpertWeights& w = routed_expert(routing, experts, static_cast<size_t>(t * routing.top_k + j));
      float* g = h.row(t * routing.top_k + j);
      matvec(x.row(t), w.gate, inter, x.cols, g);
      matvec(x.row(t), w.up, inter, x.cols, u.data());
      for (int64_t i = 0; i < inter; ++i) g[i] = silu(g[i]) * u[i];
    }
  return h;
}

Matrix moe_expert_combine(const Matrix& h, const Routing& routing,
                          const std::vector<ExpertWeights>& experts, int64_t hidden) {
  const int64_t T = routing.top_k ? h.rows / routing.top_k : 0;
  Matrix out(T, hidden);
  std::vector<float> y(static_cast<size_t>(hidden));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < routing.top_k; ++j) {
      const size_t slot = static_cast<size_t>(t * routing.top_k + j);
      const ExpertWeights& w = routed_expert(routing, experts, slot);
      matvec(h.row(static_cast<int64_t>(slot)), w.down, hidden, h.cols, y.data());
      for (int64_t c = 0; c < hidden; ++c) out.row(t)[c] += routing.weights[slot] * y[c];
    }
  return out;
}

}  // namespace kplan::cpu
