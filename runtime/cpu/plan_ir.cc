#include "runtime/cpu/plan_ir.h"

#include "ir/parser.h"
#include "ir/support/error.h"
#include "ir/verifier.h"

namespace kplan::cpu {

std::unique_ptr<ir::Module> parse_plan_ir(const plan::Plan& plan, const std::string& source) {
  if (plan.ir_text.empty()) throw Error(source + ": the plan carries no IR, so the CPU reference has nothing to run");
  std::unique_ptr<ir::Module> m = ir::parse_module(plan.ir_text, source + " (IR)");
  ir::verify(*m);
  return m;
}

}  // namespace kplan::cpu
