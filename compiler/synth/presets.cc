#include "compiler/synth/presets.h"

#include "ir/support/error.h"

namespace kplan {

namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.model_type = "deepseek_v3";
  c.vocab_size = 1024;
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.first_k_dense_replace = 1;
  c.moe_layer_freq = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 4;
  c.q_lora_rank = 128;
  c.kv_lora_rank = 64;
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 16;
  c.v_head_dim = 32;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 128;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.n_shared_experts = 1;
  c.n_group = 1;
  c.topk_group = 1;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  c.scoring_func = "sigmoid";
  c.topk_method = "noaux_tc";
  c.rope_theta = 10000.0;
  c.max_position_embeddings = 512;
  c.rms_norm_eps = 1e-6;
  c.tie_word_embeddings = false;
  c.bos_token_id = 0;
  c.eos_token_ids = {1};
  return c;
}

ModelConfig tiny2() {
  ModelConfig c = tiny();
  c.vocab_size = 1001;
  c.hidden_size = 192;
  c.num_hidden_layers = 6;
  c.first_k_dense_replace = 2;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 6;
  c.q_lora_rank = std::nullopt;
  c.kv_lora_rank = 48;
  c.qk_nope_head_dim = 24;
  c.qk_rope_head_dim = 8;
  c.v_head_dim = 20;
  c.intermediate_size = 333;
  c.moe_intermediate_size = 96;
  c.n_routed_experts = 6;
  c.num_experts_per_tok = 3;
  c.n_shared_experts = 2;
  c.routed_scaling_factor = 1.5;
  c.norm_topk_prob = false;
  c.rope_theta = 5000.0;
  c.max_position_embeddings = 384;
  c.rms_norm_eps = 1e-5;
  c.bos_token_id = 2;
  c.eos_token_ids = {3};
  return c;
}

ModelConfig tiny_yarn() {
  ModelConfig c = tiny();
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 4.0;
  c.rope_scaling.original_max_position_embeddings = 128;
  c.rope_scaling.beta_fast = 32.0;
  c.rope_scaling.beta_slow = 1.0;
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 1.0;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  c.max_position_embeddings = 512;
  return c;
}

}  // namespace

std::vector<std::string> preset_names() { return {"tiny", "tiny2", "tiny-yarn"}; }

ModelConfig preset_config(const std::string& name) {
  if (name == "tiny") return tiny();
  if (name == "tiny2") return tiny2();
  if (name == "tiny-yarn") return tiny_yarn();
  std::string known;
  for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown synth preset '" + name + "' (known: " + known + ")");
}

DraftConfig draft_config_for(const ModelConfig& target) {
  DraftConfig d;
  d.model_type = "qwen3";
  d.hidden_size = target.hidden_size;
  d.num_hidden_layers = 2;
  d.num_attention_heads = 4;
  d.num_key_value_heads = 2;
  d.head_dim = 64;
  d.intermediate_size = 2 * target.hidden_size;
  d.vocab_size = target.vocab_size;
  d.rms_norm_eps = 1e-6;
  d.rope_theta = target.rope_theta;
  d.rope_scaling = target.rope_scaling;
  d.max_position_embeddings = target.max_position_embeddings;
  d.num_target_layers = target.num_hidden_layers;
  d.block_size = 8;
  d.mask_token_id = target.vocab_size - 1;
  // Odd target layers 1, 3, 5, ...; deep targets get at most four, spread over the depth.
  const int64_t layers = target.num_hidden_layers;
  const int64_t odd = layers / 2;
  if (odd <= 4) {
    for (int64_t id = 1; id < layers; id += 2) d.target_layer_ids.push_back(id);
  } else {
    for (int64_t i = 0; i < 4; ++i) d.target_layer_ids.push_back(1 + i * (layers - 2) / 3);
  }
  if (d.target_layer_ids.empty()) d.target_layer_ids.push_back(0);
  return d;
}

DraftConfig preset_draft_config(const std::string& name) {
  DraftConfig d = draft_config_for(preset_config(name));
  if (name == "tiny2") {
    d.num_attention_heads = 3;
    d.num_key_value_heads = 1;
    d.head_dim = 40;
  }
  return d;
}

QuantConfig k26_int4_quant_config() {
  QuantConfig q;
  q.enabled = true;
  q.quant_method = "compressed-tensors";
  q.format = "pack-quantized";
  q.num_bits = 4;
  q.group_size = 32;
  q.symmetric = true;
  q.ignore = {"re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
              "re:.*lm_head.*"};
  return q;
}

}  // namespace kplan
