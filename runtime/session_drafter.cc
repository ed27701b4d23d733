#include "runtime/session_drafter.h"

#include "ir/support/error.h"

namespace kplan {

std::unique_ptr<Drafter> make_session_drafter(std::shared_ptr<const plan::Plan> plan, const std::string& source) {
  if (!plan->draft) throw Error(source + ": the plan has no DFlash drafter (compile it with --draft DIR)");
  // Seam: return make_plan_cpu_drafter(plan, source) once runtime/plan_cpu_target.h has it.
  throw Error(source + ": the DFlash drafter over a plan is not in this build yet (runtime/plan_cpu_target.h: "
                       "make_plan_cpu_drafter); use the oracle or random drafter");
}

}  // namespace kplan
