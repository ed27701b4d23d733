#pragma once
// The pass pipeline: one short ordered list (pipeline.cc). run_pipeline verifies the IR after
// every pass and can stop after a named one (for --dump-ir-after=PASS).
#include <string_view>
#include <vector>

#include "compiler/passes/pass.h"

namespace kplan::passes {

const std::vector<Pass>& pipeline();
// Throws kplan::Error listing the pass names when `name` is not one of them.
const Pass& find_pass(std::string_view name);
// Runs the passes in order, verifying after each; stops after `stop_after` when not empty.
void run_pipeline(ir::Module& m, std::string_view stop_after = {});

}  // namespace kplan::passes
