#pragma once
// The model spec: the architecture of the target (DeepSeek-V3 / Kimi K2.x) and of its DFlash
// drafter, as typed data. The compiler's frontend fills it from a HuggingFace config.json
// (compiler/frontend/model_config.h, draft_config.h: parsing and validation live there); a plan
// stores it as a typed table (schemas/kplan.fbs) so the runtime never parses config.json.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kplan {

struct RopeScaling {
  std::string type = "none";  // "none" or "yarn"
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;
  // YaRN's cos/sin amplitude when the config gives it (`attention_factor`); absent, it is
  // derived from mscale / mscale_all_dim (ir/support/yarn.h attention_factor).
  std::optional<double> attention_factor;
  bool operator==(const RopeScaling&) const = default;
};

// compressed-tensors "pack-quantized" weights (how K2.6 ships its routed experts).
struct QuantConfig {
  bool enabled = false;
  std::string quant_method;  // "compressed-tensors"
  std::string format;        // "pack-quantized"
  int num_bits = 4;
  int group_size = 32;
  bool symmetric = true;
  std::vector<std::string> ignore;  // module names, or "re:<regex>" patterns
  bool operator==(const QuantConfig&) const = default;
};

struct ModelConfig {
  std::string model_type;    // the text model's type: "deepseek_v3" or "kimi_k2"
  // "kimi_k25" when the text model sits in text_config, else "". kplan compiles the text model
  // only: a wrapper's vision tower and projector are not compiled (their tensors are ignored).
  std::string wrapper_type;
  std::string tensor_prefix; // "" or "language_model." (multimodal wrappers)

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;      // dense MLP layers
  int64_t moe_intermediate_size = 0;  // each routed / shared expert
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  std::optional<int64_t> q_lora_rank;  // null: q_proj directly
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  int64_t n_routed_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_shared_experts = 0;
  int64_t first_k_dense_replace = 0;
  int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 1.0;
  std::string scoring_func = "sigmoid";  // only sigmoid is supported
  std::string topk_method = "noaux_tc";  // only noaux_tc is supported
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool norm_topk_prob = true;

  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 4096;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  std::string hidden_act = "silu";

  QuantConfig quant;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  // MoE layers: layer >= first_k_dense_replace and layer % moe_layer_freq == 0.
  bool is_moe_layer(int64_t layer) const;
  // Softmax scale of MLA attention, YaRN mscale applied: qk_head_dim^-0.5 * m^2.
  double softmax_scale() const;
  bool operator==(const ModelConfig&) const = default;
};

struct DraftConfig {
  std::string model_type;  // e.g. "qwen3" (the architecture of its layers)
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 4096;
  int64_t num_target_layers = 0;  // the target's layer count it was trained against
  int64_t block_size = 0;         // positions predicted per pass (bonus token + mask tokens)
  std::vector<int64_t> target_layer_ids;  // target layers whose outputs form the context features
  int64_t mask_token_id = -1;
  // Sliding-window attention over the drafter's keys (dflash_config.use_swa with
  // swa_window_size or sliding_window): a key is seen when |query - key position| < window.
  // Absent: full attention. kplan runs only windows that cover the plan's whole context
  // (frontend check_draft_window), where the window changes nothing.
  std::optional<int64_t> sliding_window;
  // The drafter context window (`kplan compile --draft-context-window N`, a server-style option,
  // not a config key): @draft's block attends only to the last N committed context positions
  // (cache rows [max(0, L - N), L) at cache length L) plus its own rows. 0: the whole context.
  // Recorded on @draft's gqa_attention ops ({context_window}), which is what the CPU and GPU run.
  int64_t context_window = 0;
  bool operator==(const DraftConfig&) const = default;
};

}  // namespace kplan
