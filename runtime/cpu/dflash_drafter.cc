#include "runtime/cpu/dflash_drafter.h"

#include <cmath>
#include <string>

#include "ir/error.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_attention.h"

namespace kplan::cpu {

namespace {

void check_shape(const Matrix& m, int64_t rows, int64_t cols, const std::string& name) {
  if (m.rows != rows || m.cols != cols)
    throw Error("drafter weight '" + name + "' is [" + std::to_string(m.rows) + ", " +
                std::to_string(m.cols) + "], the config needs [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
}

// Per-head RMSNorm (Qwen3 q_norm / k_norm) of rows laid out [heads * head_dim], in place.
void head_norm(Matrix& x, int64_t heads, int64_t head_dim, const std::vector<float>& w, float eps) {
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* p = x.row(r) + h * head_dim;
      rms_norm_row(p, head_dim, w.data(), eps, p);
    }
}

void rotate_heads(Matrix& x, int64_t heads, int64_t head_dim, const Rope& rope,
                  std::span<const int32_t> positions) {
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t h = 0; h < heads; ++h) rope.apply_rotate_half(x.row(r) + h * head_dim, positions[r]);
}

Matrix from_rows(const std::vector<float>& data, int64_t cols) {
  Matrix m(static_cast<int64_t>(data.size()) / cols, cols);
  m.data = data;
  return m;
}

}  // namespace

DraftWeights load_draft_weights(const DraftConfig& c, const WeightLoader& w) {
  DraftWeights d;
  const int64_t hidden = c.hidden_size, D = c.head_dim;
  d.fc = w.linear("fc");
  check_shape(d.fc, hidden, static_cast<int64_t>(c.target_layer_ids.size()) * hidden, "fc.weight");
  d.hidden_norm = w.vector("hidden_norm.weight");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    DraftLayerWeights L;
    L.input_norm = w.vector(p + ".input_layernorm.weight");
    L.post_attention_norm = w.vector(p + ".post_attention_layernorm.weight");
    L.q = w.linear(p + ".self_attn.q_proj");
    check_shape(L.q, c.num_attention_heads * D, hidden, p + ".self_attn.q_proj.weight");
    L.k = w.linear(p + ".self_attn.k_proj");
    check_shape(L.k, c.num_key_value_heads * D, hidden, p + ".self_attn.k_proj.weight");
    L.v = w.linear(p + ".self_attn.v_proj");
    check_shape(L.v, c.num_key_value_heads * D, hidden, p + ".self_attn.v_proj.weight");
    L.o = w.linear(p + ".self_attn.o_proj");
    check_shape(L.o, hidden, c.num_attention_heads * D, p + ".self_attn.o_proj.weight");
    L.q_norm = w.vector(p + ".self_attn.q_norm.weight");
    L.k_norm = w.vector(p + ".self_attn.k_norm.weight");
    if (static_cast<int64_t>(L.q_norm.size()) != D || static_cast<int64_t>(L.k_norm.size()) != D)
      throw Error("drafter weight '" + p + ".self_attn.q_norm/k_norm' is not [head_dim " +
                  std::to_string(D) + "]");
    L.gate = w.linear(p + ".mlp.gate_proj");
    L.up = w.linear(p + ".mlp.up_proj");
    L.down = w.linear(p + ".mlp.down_proj");
    check_shape(L.gate, c.intermediate_size, hidden, p + ".mlp.gate_proj.weight");
    d.layers.push_back(std::move(L));
  }
  d.norm = w.vector("norm.weight");
  return d;
}

CpuDFlashDrafter::CpuDFlashDrafter(DraftConfig config, DraftWeights weights,
                                   std::shared_ptr<const TargetWeights> target)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      target_(std::move(target)),
      rope_(config_.head_dim, config_.rope_theta, config_.rope_scaling,
            config_.max_position_embeddings),
      ctx_k_(static_cast<size_t>(config_.num_hidden_layers)),
      ctx_v_(static_cast<size_t>(config_.num_hidden_layers)) {
  if (config_.block_size < 2) throw Error("drafter: block_size must be at least 2");
  if (target_->embed.cols != config_.hidden_size)
    throw Error("drafter hidden size " + std::to_string(config_.hidden_size) +
                " does not match the target's " + std::to_string(target_->embed.cols));
}

void CpuDFlashDrafter::reset() {
  context_length_ = 0;
  for (auto& k : ctx_k_) k.clear();
  for (auto& v : ctx_v_) v.clear();
}

void CpuDFlashDrafter::observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                               const std::vector<Matrix>& captured) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t hidden = config_.hidden_size;
  if (positions.size() != tokens.size())
    throw Error("drafter observe: " + std::to_string(positions.size()) + " positions for " +
                std::to_string(n) + " tokens");
  if (captured.size() != config_.target_layer_ids.size())
    throw Error("drafter observe: got " + std::to_string(captured.size()) +
                " captured layers, the drafter reads " +
                std::to_string(config_.target_layer_ids.size()));
  if (n == 0) return;
  // concat over capture layers -> fc -> hidden_norm.
  Matrix features(n, hidden * static_cast<int64_t>(captured.size()));
  for (size_t c = 0; c < captured.size(); ++c) {
    if (captured[c].rows != n || captured[c].cols != hidden)
      throw Error("drafter observe: captured layer " + std::to_string(config_.target_layer_ids[c]) +
                  " is [" + std::to_string(captured[c].rows) + ", " +
                  std::to_string(captured[c].cols) + "], expected [" + std::to_string(n) + ", " +
                  std::to_string(hidden) + "]");
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(captured[c].row(t), hidden, features.row(t) + static_cast<int64_t>(c) * hidden);
  }
  const float eps = static_cast<float>(config_.rms_norm_eps);
  Matrix ctx = rms_norm(matmul(features, weights_.fc), weights_.hidden_norm, eps);
  // Each layer's context K/V come from the normed features directly (no input_layernorm).
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const DraftLayerWeights& L = weights_.layers[l];
    Matrix k = matmul(ctx, L.k);
    head_norm(k, config_.num_key_value_heads, config_.head_dim, L.k_norm, eps);
    rotate_heads(k, config_.num_key_value_heads, config_.head_dim, rope_, positions);
    Matrix v = matmul(ctx, L.v);
    ctx_k_[l].insert(ctx_k_[l].end(), k.data.begin(), k.data.end());
    ctx_v_[l].insert(ctx_v_[l].end(), v.data.begin(), v.data.end());
  }
  context_length_ += n;
}

Matrix CpuDFlashDrafter::block_logits(int32_t bonus_token, int32_t bonus_position) const {
  const int64_t B = config_.block_size, Hq = config_.num_attention_heads;
  const int64_t Hkv = config_.num_key_value_heads, D = config_.head_dim;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  std::vector<int32_t> ids(static_cast<size_t>(B), static_cast<int32_t>(config_.mask_token_id));
  ids[0] = bonus_token;
  std::vector<int32_t> positions(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) positions[i] = bonus_position + static_cast<int32_t>(i);
  Matrix h = embedding(target_->embed, ids);  // the target's embedding
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const DraftLayerWeights& L = weights_.layers[l];
    Matrix x = rms_norm(h, L.input_norm, eps);
    Matrix q = matmul(x, L.q);
    head_norm(q, Hq, D, L.q_norm, eps);
    rotate_heads(q, Hq, D, rope_, positions);
    Matrix k_block = matmul(x, L.k);
    head_norm(k_block, Hkv, D, L.k_norm, eps);
    rotate_heads(k_block, Hkv, D, rope_, positions);
    Matrix v_block = matmul(x, L.v);
    // keys/values = [context ; block]
    std::vector<float> k_all = ctx_k_[l], v_all = ctx_v_[l];
    k_all.insert(k_all.end(), k_block.data.begin(), k_block.data.end());
    v_all.insert(v_all.end(), v_block.data.begin(), v_block.data.end());
    Matrix attn = gqa_attention_full(q, from_rows(k_all, Hkv * D), from_rows(v_all, Hkv * D), Hq,
                                     Hkv, D, scale);
    add_inplace(h, matmul(attn, L.o));
    add_inplace(h, swiglu_mlp(rms_norm(h, L.post_attention_norm, eps), L.gate, L.up, L.down));
  }
  // The drafter's own final norm, then the target's lm_head.
  return matmul(rms_norm(h, weights_.norm, eps), target_->lm_head);
}

Matrix CpuDFlashDrafter::propose(int32_t bonus_token, int32_t bonus_position) {
  Matrix logits = block_logits(bonus_token, bonus_position);
  Matrix out(logits.rows - 1, logits.cols);
  std::copy(logits.data.begin() + logits.cols, logits.data.end(), out.data.begin());
  return log_softmax(out);
}

}  // namespace kplan::cpu
