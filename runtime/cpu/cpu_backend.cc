#include "runtime/cpu/cpu_backend.h"

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "ir/error.h"
#include "runtime/cpu/cpu_target.h"
#include "runtime/cpu/dflash_drafter.h"
#include "runtime/cpu/weight_loader.h"

namespace kplan {

std::unique_ptr<TargetModel> make_cpu_target(const std::filesystem::path& checkpoint_dir,
                                             int64_t max_context) {
  ModelConfig config = load_model_config(checkpoint_dir / "config.json");
  if (max_context < 0) throw Error("max context must not be negative");
  cpu::WeightLoader loader(checkpoint_dir, config.tensor_prefix);
  auto weights = std::make_shared<const cpu::TargetWeights>(cpu::load_target_weights(config, loader));
  return std::make_unique<cpu::CpuTarget>(std::move(config), std::move(weights), max_context);
}

std::unique_ptr<Drafter> make_cpu_dflash_drafter(const std::filesystem::path& draft_dir,
                                                 const TargetModel& target) {
  const auto* cpu_target = dynamic_cast<const cpu::CpuTarget*>(&target);
  if (!cpu_target)
    throw Error("the CPU DFlash drafter needs a CPU target (it shares its embedding and lm_head)");
  DraftConfig config = load_draft_config(draft_dir / "config.json");
  check_draft_fits_target(config, target.config());
  cpu::WeightLoader loader(draft_dir, "");
  cpu::DraftWeights weights = cpu::load_draft_weights(config, loader);
  return std::make_unique<cpu::CpuDFlashDrafter>(std::move(config), std::move(weights),
                                                 cpu_target->weights());
}

}  // namespace kplan
