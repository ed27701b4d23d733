#pragma once
// Lowering: the final IR -> launches as data (plan::LoweredPlan), through the lowering stages of
// pipeline.cc (select-kernels, weight-layout, plan-memory, bucketize, emit-plan). Views (slice,
// reshape, transpose) become strides and offsets, never copies; every other op becomes one or two
// launches whose arguments name buffer slots, weights, scalars and step inputs. Activations are
// stored in f32 (the IR's types); the KV cache of layer L is the persistent slot "kv.L" of
// max_context rows (kv_append writes rows CacheLength.., mla_attention reads them, @target_commit's
// kv_compact keeps the accepted ones). Scratch slots are reused once their last reader has run.
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "compiler/frontend/safetensors.h"
#include "compiler/passes/lower_state.h"
#include "compiler/passes/lowered_plan.h"
#include "ir/ir.h"

namespace kplan::passes {

// The most KV rows a plan may hold: kernels take row counts and indices as int32.
inline constexpr int64_t kMaxContextRows = 2147483647;

// @target (and @target_commit when the module has it) to launches; weights: every function's.
// Throws kplan::Error naming the op for an IR construct no kernel handles.
plan::LoweredPlan lower_module(const ir::Module& module, const WeightBytes& weights, const LowerOptions& options);

// The LowerState lower_module starts from (the stages then run on it): validated options.
LowerState lowering_state(const ir::Module& module, const WeightBytes& weights, const LowerOptions& options);

// One @target function alone (tests): the bytes of a target checkpoint tensor by name.
using TargetWeightBytes = std::function<std::span<const uint8_t>(const std::string& name)>;
plan::LoweredPlan lower_target(const ir::Function& target, const TargetWeightBytes& weights, const LowerOptions& options);
// Weights viewed in an opened checkpoint (which must stay open until the plan is written).
plan::LoweredPlan lower_target(const ir::Function& target, const SafetensorsCheckpoint& checkpoint, const LowerOptions& options);

}  // namespace kplan::passes

namespace kplan::codegen {
using passes::LowerOptions;
using passes::lower_target;
}  // namespace kplan::codegen
