#pragma once
// The target model's architecture as read from a HuggingFace config.json (model types
// deepseek_v3, kimi_k2, and kimi_k25 through its text_config). Every field the DeepSeek-V3
// architecture uses; anything kplan does not support is refused by name when parsed.
#include <filesystem>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "schemas/model_spec.h"

namespace kplan {

// The most decoder layers a target or drafter config may have (Kimi K2.6: 61; DFlash drafters:
// 1-8): a config past it is refused by field before any per-layer list is built (a drafter with
// 10^11 layers once asked for 2 GiB of tap ids, found by fuzz_draft_config).
constexpr int64_t kMaxConfigLayers = 100'000;

// True when a Linear module (e.g. "model.layers.3.mlp.experts.0.gate_proj") is quantized under q.
bool is_quantized(const QuantConfig& q, const std::string& module_name);

// Parses and validates a config.json (its text). `source` names the file in errors.
ModelConfig parse_model_config(const nlohmann::json& j, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& config_json);
// Writes the config back as HuggingFace config.json (deepseek_v3 layout; used by `kplan synth`).
nlohmann::json model_config_to_json(const ModelConfig& c);

// Keeps the first `layers` decoder layers (`kplan compile --layers N`): the first
// first_k_dense_replace stay dense, the rest MoE, as in the full model; the embedding, final norm
// and lm_head are kept. Throws kplan::Error naming --layers unless 1 <= layers <= num_hidden_layers.
void slice_layers(ModelConfig& c, int64_t layers);

}  // namespace kplan
