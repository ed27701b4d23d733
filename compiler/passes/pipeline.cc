#include "compiler/passes/pipeline.h"

#include <string>

#include "ir/support/error.h"
#include "ir/verifier.h"

namespace kplan::passes {

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      {"infer-shapes", "recompute every result type from operands and attributes; refuse mismatches", infer_shapes},
      {"mla-absorb", "absorb kv_b_proj into the query (W_UK) and output (W_UV): attention over the latent cache", mla_absorb},
      {"dce", "remove ops whose results nothing uses", dce},
  };
  return passes;
}

const std::vector<LoweringStage>& lowering_stages() {
  static const std::vector<LoweringStage> stages = {
      {"storage-dtypes", "the dtype the device stores each activation and KV cache in (caches bf16 with --kv-cache bf16; activations with --activations bf16, residual, router, logits and drafter f32)", storage_dtypes},
      {"select-kernels", "choose each op's kernel instances for the plan's arch (the home of fusions)", select_kernels},
      {"weight-layout", "the weights table: every weight of every function by (source, name), stacked experts, layouts", weight_layout},
      {"plan-memory", "liveness -> buffer slots with reuse; step inputs, KV caches, in-place kv_append/kv_compact aliases", plan_memory},
      {"bucketize", "one launch sequence per (program, token count): @target buckets, one @target_commit", bucketize},
      {"emit-plan", "annotated IR -> launches (kernel, grid, block, typed arguments) and step outputs", emit_plan},
      {"emit-round", "a greedy DDTree round's control as device steps (draft inputs, tree, walk) beside a drafter", emit_round},
  };
  return stages;
}

bool is_lowering_stage(std::string_view name) {
  for (const LoweringStage& s : lowering_stages())
    if (s.name == name) return true;
  return false;
}

void run_lowering(LowerState& s, std::string_view stop_after) {
  for (const LoweringStage& stage : lowering_stages()) {
    try {
      stage.run(s);
    } catch (const Error& e) {
      throw Error("lowering stage " + std::string(stage.name) + ": " + e.what());
    }
    if (stage.name == stop_after) return;
  }
}

const Pass& find_pass(std::string_view name) {
  std::string names;
  for (const Pass& p : pipeline()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  for (const LoweringStage& s : lowering_stages()) names += ", " + std::string(s.name);
  throw Error("unknown pass '" + std::string(name) + "' (passes: " + names + ")");
}

void run_pipeline(ir::Module& m, std::string_view stop_after) {
  if (!stop_after.empty()) find_pass(stop_after);  // a typo fails before any work
  ir::verify(m);
  for (const Pass& p : pipeline()) {
    p.run(m);
    try {
      ir::verify(m);
    } catch (const Error& e) {
      throw Error("after pass " + std::string(p.name) + ": " + e.what());
    }
    if (p.name == stop_after) return;
  }
}

}  // namespace kplan::passes
