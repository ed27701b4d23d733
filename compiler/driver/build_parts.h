#pragma once
// Internal pieces of build_module (compiler/driver/build_ir.h), one file per function family.
#include <vector>

#include "compiler/driver/build_ir.h"
#include "compiler/driver/weight_table.h"

namespace kplan {

// f32[S, kv_lora_rank + qk_rope_head_dim]: one layer's MLA cache (latent | k_rope).
ir::Type kv_cache_type(const ModelConfig& c);

// Adds @target and @target_commit.
void build_target(const ModelConfig& c, const WeightTable& w, const BuildOptions& opt,
                  const std::vector<int64_t>& capture, ir::Module& m);

// Adds @draft_context, @draft and @draft_commit; `target_w` gives the target's embedding and
// lm_head. `top_k` > 0: @draft also returns each depth's top_k log-probabilities and ids.
void build_draft(const DraftConfig& d, const ModelConfig& target, const WeightTable& draft_w,
                 const WeightTable& target_w, int64_t top_k, ir::Module& m);

}  // namespace kplan
