#pragma once
// RoPE settings of a config.json, shared by the target and the drafter: rope_theta with
// rope_scaling (transformers 4: null, or a dict keyed by "type" or "rope_type") or
// rope_parameters (transformers 5: rope_theta and rope_type inside). Supports default and YaRN;
// anything else is refused by name.
#include <cstdint>

#include "compiler/frontend/json_fields.h"
#include "compiler/frontend/model_config.h"

namespace kplan {

struct RopeFields {
  double theta = 10000.0;
  RopeScaling scaling;
};

// `model`: the model's config object; `max_position_embeddings` is checked against YaRN's
// factor * original_max_position_embeddings.
RopeFields parse_rope_fields(const JsonFields& model, int64_t max_position_embeddings);

// The rope_scaling dict for a config.json (null when no scaling).
nlohmann::json rope_scaling_to_json(const RopeScaling& r);

}  // namespace kplan
