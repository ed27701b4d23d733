#pragma once
// The DFlash block-diffusion drafter's config.json: Qwen3-style decoder layers (q_norm/k_norm,
// GQA) that attend non-causally over [context features ; block], plus the DFlash fields
// (block_size, dflash_config.target_layer_ids, mask_token_id). The drafter has no embedding or
// lm_head of its own; it uses the target's.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/frontend/model_config.h"

namespace kplan {

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
};

DraftConfig parse_draft_config(const nlohmann::json& j, const std::string& source);
DraftConfig load_draft_config(const std::filesystem::path& config_json);
nlohmann::json draft_config_to_json(const DraftConfig& c);
// Refuses a drafter that does not fit the target (hidden size, vocab, layer ids), by name.
void check_draft_fits_target(const DraftConfig& draft, const ModelConfig& target);

}  // namespace kplan
