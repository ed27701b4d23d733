#pragma once
// A checkpoint directory (and optionally a DFlash drafter directory) as an in-memory plan for the
// CPU reference: the header, the typed specs, the config texts, the tokenizer, the IR after the
// whole pass pipeline, and every weight any function of the IR names (target and draft), as
// views of the mapped checkpoints (kept alive by Plan::backing; stacked experts are copied). It
// has no kernels, buckets or buffers: it is never written or validated as a GPU plan; it is what
// runtime/plan_cpu_target.h runs, exactly as it runs a .kplan file's IR.
#include <filesystem>
#include <optional>

#include "compiler/frontend/safetensors.h"
#include "schemas/plan_model.h"

namespace kplan {

// Marks a reference plan (Header::compiler_version); its Header::archs is empty.
inline constexpr const char* kReferencePlanCompiler = "kplan-reference";

struct ReferencePlanOptions {
  std::optional<std::filesystem::path> draft;  // DFlash drafter directory
  // @target returns every decoder layer's output ("hidden.L"), so any capture layers can be set
  // at run time; false: only the drafter's target_layer_ids, as `kplan compile` does.
  bool capture_all_layers = true;
  bool tree_mask = true;  // @target takes %tree_mask (false: causal only)
  int64_t draft_context_window = 0;  // CompileOptions::draft_context_window
  SafetensorsCheckpoint::FileProgress on_files{};  // CompileOptions::on_files
};

// Opens and validates the checkpoint(s) (every tensor; a drafter that does not fit the target is
// refused), builds the IR and runs the pass pipeline. Throws kplan::Error naming the problem.
plan::Plan reference_plan(const std::filesystem::path& checkpoint_dir, const ReferencePlanOptions& options = {});

}  // namespace kplan
