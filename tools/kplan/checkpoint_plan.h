#pragma once
// `kplan run DIR`: a checkpoint directory as an in-memory plan with no kernels (the CPU reference
// runs it), so the run goes through the C API like a compiled plan's: the typed spec, the
// config text, the tokenizer bundle and every target tensor as a view of the mapped checkpoint
// (no copy). A drafter directory is validated against the target and its spec recorded.
// Stand-in for compiler/driver/reference_plan.h (the cpuplan work), which replaces it.
#include <filesystem>
#include <memory>
#include <optional>

#include "schemas/plan_model.h"

namespace kplan::cli {

std::shared_ptr<const plan::Plan> checkpoint_plan(const std::filesystem::path& dir,
                                                  const std::optional<std::filesystem::path>& draft_dir);

}  // namespace kplan::cli
