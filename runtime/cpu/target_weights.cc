#include "runtime/cpu/target_weights.h"

#include <string>

#include "ir/error.h"

namespace kplan::cpu {

namespace {

MlpWeights load_mlp(const WeightLoader& w, const std::string& prefix) {
  return MlpWeights{w.linear(prefix + ".gate_proj"), w.linear(prefix + ".up_proj"),
                    w.linear(prefix + ".down_proj")};
}

void check_shape(const Matrix& m, int64_t rows, int64_t cols, const std::string& name) {
  if (m.rows != rows || m.cols != cols)
    throw Error("weight '" + name + "' is [" + std::to_string(m.rows) + ", " +
                std::to_string(m.cols) + "], the config needs [" + std::to_string(rows) + ", " +
                std::to_string(cols) + "]");
}

}  // namespace

TargetWeights load_target_weights(const ModelConfig& c, const WeightLoader& w) {
  TargetWeights t;
  const int64_t H = c.num_attention_heads;
  t.embed = w.linear("model.embed_tokens");
  check_shape(t.embed, c.vocab_size, c.hidden_size, "model.embed_tokens.weight");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    LayerWeights L;
    L.input_norm = w.vector(p + ".input_layernorm.weight");
    L.post_attention_norm = w.vector(p + ".post_attention_layernorm.weight");
    AttentionWeights& a = L.attn;
    if (c.q_lora_rank) {
      a.q_a = w.linear(p + ".self_attn.q_a_proj");
      a.q_a_norm = w.vector(p + ".self_attn.q_a_layernorm.weight");
      a.q_b = w.linear(p + ".self_attn.q_b_proj");
      check_shape(a.q_b, H * c.qk_head_dim(), *c.q_lora_rank, p + ".self_attn.q_b_proj.weight");
    } else {
      a.q_b = w.linear(p + ".self_attn.q_proj");
      check_shape(a.q_b, H * c.qk_head_dim(), c.hidden_size, p + ".self_attn.q_proj.weight");
    }
    a.kv_a = w.linear(p + ".self_attn.kv_a_proj_with_mqa");
    check_shape(a.kv_a, c.kv_lora_rank + c.qk_rope_head_dim, c.hidden_size,
                p + ".self_attn.kv_a_proj_with_mqa.weight");
    a.kv_a_norm = w.vector(p + ".self_attn.kv_a_layernorm.weight");
    a.kv_b = w.linear(p + ".self_attn.kv_b_proj");
    check_shape(a.kv_b, H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank,
                p + ".self_attn.kv_b_proj.weight");
    a.o = w.linear(p + ".self_attn.o_proj");
    check_shape(a.o, c.hidden_size, H * c.v_head_dim, p + ".self_attn.o_proj.weight");
    // transformers' DeepseekV3 makes every layer >= first_k_dense_replace MoE and ignores
    // moe_layer_freq; the frontend (and the checkpoint's tensors) honour it. They agree for
    // moe_layer_freq 1 (every preset and K2.6).
    if (c.is_moe_layer(l)) {
      MoeWeights m;
      m.router = w.linear(p + ".mlp.gate");
      check_shape(m.router, c.n_routed_experts, c.hidden_size, p + ".mlp.gate.weight");
      m.router_bias = w.vector(p + ".mlp.gate.e_score_correction_bias");
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        m.experts.push_back(load_mlp(w, p + ".mlp.experts." + std::to_string(e)));
      if (c.n_shared_experts > 0) m.shared = load_mlp(w, p + ".mlp.shared_experts");
      L.moe = std::move(m);
    } else {
      L.dense = load_mlp(w, p + ".mlp");
    }
    t.layers.push_back(std::move(L));
  }
  t.final_norm = w.vector("model.norm.weight");
  if (c.tie_word_embeddings && !w.contains("lm_head.weight"))
    t.lm_head = t.embed;
  else
    t.lm_head = w.linear("lm_head");
  check_shape(t.lm_head, c.vocab_size, c.hidden_size, "lm_head.weight");
  return t;
}

}  // namespace kplan::cpu
