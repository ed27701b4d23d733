#include "runtime/cpu/cpu_backend.h"

#include "ir/support/error.h"
#include "runtime/cpu/cpu_target.h"
#include "runtime/cpu/dflash_drafter.h"

namespace kplan {

std::unique_ptr<TargetModel> make_cpu_target(const std::filesystem::path& checkpoint_dir,
                                             int64_t max_context) {
  return std::make_unique<cpu::CpuTarget>(checkpoint_dir, max_context);
}

std::unique_ptr<Drafter> make_cpu_dflash_drafter(const std::filesystem::path& draft_dir,
                                                 const TargetModel& target) {
  const auto* cpu_target = dynamic_cast<const cpu::CpuTarget*>(&target);
  if (!cpu_target)
    throw Error("the CPU DFlash drafter needs a CPU target (it shares its embedding and lm_head)");
  return std::make_unique<cpu::CpuDFlashDrafter>(cpu_target->checkpoint_dir(), draft_dir);
}

}  // namespace kplan
