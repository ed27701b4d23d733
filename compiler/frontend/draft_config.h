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



DraftConfig parse_draft_config(const nlohmann::json& j, const std::string& source);
DraftConfig load_draft_config(const std::filesystem::path& config_json);
nlohmann::json draft_config_to_json(const DraftConfig& c);
// Refuses a drafter that does not fit the target (hidden size, vocab, layer ids), by name.
void check_draft_fits_target(const DraftConfig& draft, const ModelConfig& target);

}  // namespace kplan
