#include "runtime/plan_cpu_target.h"

#include "runtime/cpu/cpu_target.h"
#include "runtime/cpu/dflash_drafter.h"

namespace kplan {

std::unique_ptr<TargetModel> make_plan_cpu_target(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                                  int64_t max_context, std::shared_ptr<const cpu::WeightTable> weights) {
  return std::make_unique<cpu::CpuTarget>(std::move(plan), source, max_context, std::move(weights));
}

std::unique_ptr<Drafter> make_plan_cpu_drafter(std::shared_ptr<const plan::Plan> plan, const std::string& source,
                                               std::shared_ptr<const cpu::WeightTable> weights) {
  return std::make_unique<cpu::CpuDFlashDrafter>(std::move(plan), source, std::move(weights));
}

}  // namespace kplan
