#pragma once
// The pass pipeline: one short ordered list (pipeline.cc). run_pipeline verifies the IR after
// every pass and can stop after a named one (for --dump-ir-after=PASS).
#include <string_view>
#include <vector>

#include "compiler/passes/lower_state.h"
#include "compiler/passes/pass.h"

namespace kplan::passes {

const std::vector<Pass>& pipeline();
// Throws kplan::Error listing the pass names when `name` is not one of them.
const Pass& find_pass(std::string_view name);
// Runs the passes in order, verifying after each; stops after `stop_after` when not empty.
void run_pipeline(ir::Module& m, std::string_view stop_after = {});

// The lowering stages after the IR passes: the final IR -> launches as data. Each reads the IR
// and what the stages before it recorded in the LowerState (lower_state.h).
struct LoweringStage {
  std::string_view name;
  std::string_view summary;
  void (*run)(LowerState& s);
};
const std::vector<LoweringStage>& lowering_stages();
bool is_lowering_stage(std::string_view name);
// Runs the lowering stages in order; stops after `stop_after` when not empty (a lowering stage).
void run_lowering(LowerState& s, std::string_view stop_after = {});

}  // namespace kplan::passes
