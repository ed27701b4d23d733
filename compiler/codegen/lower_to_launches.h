#pragma once
// Lowering: the final IR of @target -> launches as data (plan::LoweredPlan), one launch sequence
// per token-count bucket. Views (slice, reshape, transpose) become strides and offsets, never
// copies; every other op picks its kernel instance through model_kernels.h and becomes one or two
// launches whose arguments name buffer slots, weights, scalars and step inputs. Activations are
// stored in f32 (the IR's types); the KV cache of layer L is the persistent slot "kv.L" of
// max_context rows (kv_append writes rows CacheLength.., mla_attention reads them; the runtime
// commits a step with kv_compact). Scratch slots are reused once their last reader has run.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compiler/frontend/safetensors.h"
#include "compiler/plan/lowered_plan.h"
#include "ir/ir.h"

namespace kplan::codegen {

struct LowerOptions {
  std::vector<int64_t> buckets = {1};  // token counts, each gets its own launch sequence
  int64_t max_context = 0;             // KV cache rows (> 0)
  int64_t max_tree_nodes = 0;          // recorded in the limits (0: no tree buckets)
};

// The bytes of a checkpoint tensor by its name (dtype and shape are the IR weight op's type).
using WeightBytes = std::function<std::span<const uint8_t>(const std::string& name)>;

// Throws kplan::Error naming the op for an IR construct no kernel handles.
plan::LoweredPlan lower_target(const ir::Function& target, const WeightBytes& weights,
                               const LowerOptions& options);
// Weights viewed in an opened checkpoint (which must stay open until the plan is written).
plan::LoweredPlan lower_target(const ir::Function& target, const SafetensorsCheckpoint& checkpoint,
                               const LowerOptions& options);

}  // namespace kplan::codegen
