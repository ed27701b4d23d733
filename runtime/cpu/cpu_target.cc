#include "runtime/cpu/cpu_target.h"

#include <algorithm>
#include <string>

#include "ir/error.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/step_mask.h"

namespace kplan::cpu {

namespace {

// transformers builds q_a_layernorm and kv_a_layernorm as DeepseekV3RMSNorm(dim) with its
// default eps 1e-6, NOT config.rms_norm_eps (vLLM and SGLang pass rms_norm_eps). We follow
// transformers; the two differ for configs whose rms_norm_eps is not 1e-6 (e.g. tiny2: 1e-5).
constexpr float kLatentNormEps = 1e-6f;

// Columns [from, from + n) of m.
Matrix columns(const Matrix& m, int64_t from, int64_t n) {
  Matrix out(m.rows, n);
  for (int64_t r = 0; r < m.rows; ++r) std::copy_n(m.row(r) + from, n, out.row(r));
  return out;
}

}  // namespace

CpuTarget::CpuTarget(ModelConfig config, std::shared_ptr<const TargetWeights> weights,
                     int64_t max_context)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      dims_{config_.num_attention_heads, config_.kv_lora_rank, config_.qk_nope_head_dim,
            config_.qk_rope_head_dim, config_.v_head_dim},
      // transformers' DeepseekV3Config sets head_dim = qk_rope_head_dim, which is the width
      // its rope init (YaRN included) uses.
      rope_(config_.qk_rope_head_dim, config_.rope_theta, config_.rope_scaling,
            config_.max_position_embeddings),
      // qk_head_dim^-0.5, times yarn_get_mscale(factor, mscale_all_dim)^2 under YaRN.
      softmax_scale_(static_cast<float>(config_.softmax_scale())),
      cache_(config_.num_hidden_layers,
             max_context > 0 ? max_context : config_.max_position_embeddings,
             config_.kv_lora_rank, config_.qk_rope_head_dim) {}

void CpuTarget::set_capture_layers(std::vector<int64_t> layer_ids) {
  for (int64_t id : layer_ids)
    if (id < 0 || id >= config_.num_hidden_layers)
      throw Error("capture layer " + std::to_string(id) + " is not a decoder layer (the target has " +
                  std::to_string(config_.num_hidden_layers) + ")");
  capture_layers_ = std::move(layer_ids);
}

void CpuTarget::check_step(const StepInput& in) const {
  const int64_t T = static_cast<int64_t>(in.tokens.size());
  if (T == 0) throw Error("forward: a step needs at least one token (empty prompt?)");
  if (in.positions.size() != in.tokens.size())
    throw Error("forward: " + std::to_string(in.positions.size()) + " position ids for " +
                std::to_string(T) + " tokens");
  if (!in.tree_mask.empty() && static_cast<int64_t>(in.tree_mask.size()) != T * mask_words(T))
    throw Error("forward: tree mask has " + std::to_string(in.tree_mask.size()) +
                " words, expected " + std::to_string(T * mask_words(T)) + " for " +
                std::to_string(T) + " tokens");
  for (int32_t p : in.positions)
    if (p < 0) throw Error("forward: negative position id " + std::to_string(p));
  if (cache_.committed() + T > cache_.capacity())
    throw Error("context full: " + std::to_string(cache_.committed()) + " cached + " +
                std::to_string(T) + " new tokens exceed the maximum context of " +
                std::to_string(cache_.capacity()));
}

StepOutput CpuTarget::forward(const StepInput& in) {
  check_step(in);
  const TargetWeights& w = *weights_;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  cache_.begin_step(static_cast<int64_t>(in.tokens.size()));
  StepOutput out;
  out.captured.resize(capture_layers_.size());
  Matrix h = embedding(w.embed, in.tokens);
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const LayerWeights& L = w.layers[l];
    add_inplace(h, attention(l, rms_norm(h, L.input_norm, eps), in));
    add_inplace(h, mlp(l, rms_norm(h, L.post_attention_norm, eps)));
    for (size_t c = 0; c < capture_layers_.size(); ++c)
      if (capture_layers_[c] == l) out.captured[c] = h;
  }
  out.logits = matmul(rms_norm(h, w.final_norm, eps), w.lm_head);
  return out;
}

Matrix CpuTarget::attention(int64_t layer, const Matrix& x, const StepInput& in) {
  const AttentionWeights& a = weights_->layers[layer].attn;
  const int64_t T = x.rows, H = dims_.heads, qk = config_.qk_head_dim();
  const int64_t C = dims_.kv_lora, R = dims_.rope, N = dims_.nope;
  Matrix q = a.q_a ? matmul(rms_norm(matmul(x, *a.q_a), a.q_a_norm, kLatentNormEps), a.q_b)
                   : matmul(x, a.q_b);  // [T, H*qk], each head [nope | rope]
  Matrix q_nope(T, H * N), q_rope(T, H * R);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(q.row(t) + h * qk, N, q_nope.row(t) + h * N);
      float* qr = q_rope.row(t) + h * R;
      std::copy_n(q.row(t) + h * qk + N, R, qr);
      rope_.apply_interleaved(qr, in.positions[t]);
    }
  // kv_a_proj_with_mqa -> [latent C | k_rope R]; the latent is normed, k_rope rotated; both
  // go to this step's pending cache rows.
  Matrix kv = matmul(x, a.kv_a);
  Matrix latent = rms_norm(columns(kv, 0, C), a.kv_a_norm, kLatentNormEps);
  const int64_t base = cache_.committed();
  for (int64_t t = 0; t < T; ++t) {
    std::copy_n(latent.row(t), C, cache_.latent(layer).row(base + t));
    float* kr = cache_.rope_key(layer).row(base + t);
    std::copy_n(kv.row(t) + C, R, kr);
    rope_.apply_interleaved(kr, in.positions[t]);
  }
  Matrix o_latent = mla_attention_absorbed(mla_absorb_query(q_nope, a.kv_b, dims_), q_rope,
                                           cache_.latent(layer), cache_.rope_key(layer), base,
                                           in.tree_mask, dims_, softmax_scale_);
  return matmul(mla_expand_value(o_latent, a.kv_b, dims_), a.o);
}

Matrix CpuTarget::mlp(int64_t layer, const Matrix& x) const {
  const LayerWeights& L = weights_->layers[layer];
  if (L.dense) return swiglu_mlp(x, L.dense->gate, L.dense->up, L.dense->down);
  const MoeWeights& m = *L.moe;
  RouterParams p{config_.n_routed_experts,     config_.num_experts_per_tok,
                 config_.n_group,              config_.topk_group,
                 config_.norm_topk_prob,       static_cast<float>(config_.routed_scaling_factor)};
  std::vector<ExpertWeights> experts;
  for (const MlpWeights& e : m.experts) experts.push_back(e.view());
  Matrix y = moe_experts(x, moe_route(x, m.router, m.router_bias, p), experts);
  // Shared experts are added unscaled.
  if (config_.n_shared_experts > 0)
    add_inplace(y, swiglu_mlp(x, m.shared.gate, m.shared.up, m.shared.down));
  return y;
}

void CpuTarget::commit(std::span<const int32_t> keep) { cache_.commit(keep); }

}  // namespace kplan::cpu
