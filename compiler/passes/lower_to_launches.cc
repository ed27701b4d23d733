#include "compiler/passes/lower_to_launches.h"

#include <algorithm>

#include "compiler/passes/pipeline.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

LowerState start(const ir::Module* module, std::vector<const ir::Function*> programs, const WeightBytes& weights,
                 const LowerOptions& options) {
  if (options.buckets.empty()) throw Error("codegen: no token-count buckets to lower for");
  if (options.max_context <= 0) throw Error("codegen: max_context must be positive");
  if (options.max_context > kMaxContextRows)
    throw Error("codegen: max_context " + std::to_string(options.max_context) + " is past what the kernels' 32-bit row indices address (" +
                std::to_string(kMaxContextRows) + ")");
  for (int64_t b : options.buckets) {
    if (b < 1 || b > options.max_context) throw Error("codegen: bucket of " + std::to_string(b) + " tokens is out of range");
  }
  LowerState s;
  s.module = module;
  s.options = options;
  s.weight_bytes = weights;
  s.programs = std::move(programs);
  s.max_tokens = *std::max_element(options.buckets.begin(), options.buckets.end());
  return s;
}

}  // namespace

LowerState lowering_state(const ir::Module& module, const WeightBytes& weights, const LowerOptions& options) {
  std::vector<const ir::Function*> programs;
  const ir::Function* target = module.function("target");
  if (!target) throw Error("the IR has no @target function to lower");
  programs.push_back(target);
  if (const ir::Function* commit = module.function("target_commit")) programs.push_back(commit);
  // The drafter runs on the device too: its context step after each target step (reading the
  // target's captured outputs), its commit beside the target's, its propose.
  int64_t draft_rows = 0;
  for (const char* name : {"draft_context", "draft_commit", "draft"})
    if (const ir::Function* fn = module.function(name)) {
      if (!module.attrs().has("block_size")) throw Error("the IR has @" + std::string(name) + " but no block_size attribute");
      draft_rows = module.attrs().get_int("block_size");
      programs.push_back(fn);
    }
  LowerState s = start(&module, std::move(programs), weights, options);
  s.draft_rows = draft_rows;
  return s;
}

plan::LoweredPlan lower_module(const ir::Module& module, const WeightBytes& weights, const LowerOptions& options) {
  LowerState s = lowering_state(module, weights, options);
  run_lowering(s);
  return std::move(*s.lowered);
}

plan::LoweredPlan lower_target(const ir::Function& target, const TargetWeightBytes& weights, const LowerOptions& options) {
  WeightBytes by_source;
  if (weights) by_source = [weights](const std::string&, const std::string& name) { return weights(name); };
  LowerState s = start(nullptr, {&target}, by_source, options);
  run_lowering(s);
  return std::move(*s.lowered);
}

plan::LoweredPlan lower_target(const ir::Function& target, const SafetensorsCheckpoint& checkpoint, const LowerOptions& options) {
  return lower_target(target, [&](const std::string& name) { return checkpoint.get(name).bytes; }, options);
}

}  // namespace kplan::passes
