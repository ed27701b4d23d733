#pragma once
// DeepSeek-V3 mixture of experts as transformers' DeepseekV3MoE computes it:
// router: scores = sigmoid(x @ gate^T) in fp32; e_score_correction_bias is added for CHOOSING
// experts only; group-limited choice (each group scored by the sum of its top-2 biased scores,
// the best topk_group groups kept, the other experts' biased scores set to 0.0 — transformers
// masks with 0, not -inf, and so do we); top_k experts by biased score; their weights are the
// UNBIASED scores, divided by (sum + 1e-20) when norm_topk_prob, then ALWAYS times
// routed_scaling_factor. Output = sum_k weight_k * expert_k(x) + shared_experts(x) (unscaled).
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/step_model.h"

namespace kplan::cpu {

struct RouterParams {
  int64_t n_experts = 0;
  int64_t top_k = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
};

struct Routing {
  int64_t top_k = 0;
  std::vector<int32_t> experts;  // [T, top_k]
  std::vector<float> weights;    // [T, top_k]
  // [T]: the last chosen expert's selection score less the best unchosen one's (infinite when
  // every expert is chosen): how far each row's choice is from a tie. A rounded input may flip a
  // choice within it, a jump in the layer's output that no logit tolerance covers.
  std::vector<float> margins;
};

// logits [T, n_experts] (x @ gate^T, fp32), bias [n_experts].
Routing moe_route_logits(const Matrix& logits, std::span<const float> bias, const RouterParams& p);
// x [T, hidden], gate [n_experts, hidden], bias [n_experts].
Routing moe_route(const Matrix& x, const Matrix& gate, std::span<const float> bias,
                  const RouterParams& p);

// One SwiGLU expert's weights, row-major: gate/up [inter, hidden], down [hidden, inter].
struct ExpertWeights {
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
  int64_t inter = 0;
};

// sum over each token's chosen experts of weight * expert(x) -> [T, hidden]. Experts are
// visited in index order, as transformers' loop does.
Matrix moe_experts(const Matrix& x, const Routing& routing,
                   const std::vector<ExpertWeights>& experts);

// The same experts in the two halves the GPU kernels split them into (moe_grouped.cuh):
// moe_expert_hidden gives h [T*top_k, inter], row t*top_k+j = silu(gate_e x[t]) * (up_e x[t]) with
// e = experts[t, j]; moe_expert_combine gives [T, hidden] = sum_j weights[t, j] * down_e h[t*top_k+j]
// (only gate/up, resp. down, of each ExpertWeights are read). Expert ids must index `experts`.
Matrix moe_expert_hidden(const Matrix& x, const Routing& routing,
                         const std::vector<ExpertWeights>& experts);
Matrix moe_expert_combine(const Matrix& h, const Routing& routing,
                          const std::vector<ExpertWeights>& experts, int64_t hidden);

}  // namespace kplan::cpu
