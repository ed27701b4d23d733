#pragma once
// Named synthetic model shapes for tests: `tiny`, `tiny2` (every dimension different and odd
// where the architecture allows, q_lora_rank null) and `tiny-yarn` (tiny with YaRN rope and
// group-limited routing), plus the DFlash drafter sized for each.
#include <string>
#include <vector>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"

namespace kplan {

std::vector<std::string> preset_names();
// Throws kplan::Error naming the known presets when `name` is not one of them.
ModelConfig preset_config(const std::string& name);
DraftConfig preset_draft_config(const std::string& name);
// A DFlash drafter for any target: hidden = target hidden, 2 Qwen3-style layers, 4 heads, 2 kv
// heads, head_dim 64, intermediate 2 * hidden, block size 8, mask token vocab - 1, rope like
// the target's, and context features from target layers 1, 3, 5, ... (at most 4, spread).
DraftConfig draft_config_for(const ModelConfig& target);
// The compressed-tensors INT4 quantization K2.6 ships (routed experts only), without the
// vision-tower entries of its ignore list.
QuantConfig k26_int4_quant_config();

}  // namespace kplan
