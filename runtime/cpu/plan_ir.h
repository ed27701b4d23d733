#pragma once
// The IR a plan carries (Plan::ir_text, printed after the whole pass pipeline), parsed and
// verified once per CPU model: what the CPU reference executes, so it checks what was compiled.
#include <memory>
#include <string>

#include "ir/ir.h"
#include "schemas/plan_model.h"

namespace kplan::cpu {

// Throws kplan::Error naming `source` when the plan has no IR or it does not parse or verify.
std::unique_ptr<ir::Module> parse_plan_ir(const plan::Plan& plan, const std::string& source);

}  // namespace kplan::cpu
