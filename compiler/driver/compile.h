#pragma once
// The compile pipeline up to the IR: open the checkpoint(s) (config, and unless structure-only
// the safetensors, every tensor validated), build the naive IR, run the pass pipeline.
// `kplan compile` and the plan writer start from here.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "compiler/driver/build_ir.h"
#include "compiler/frontend/checkpoint.h"
#include "ir/ir.h"

namespace kplan {

struct CompileOptions {
  std::filesystem::path model;                // checkpoint directory (or its config.json)
  std::optional<std::filesystem::path> draft;  // DFlash drafter directory
  std::string draft_yarn_amplitude = "config";  // the drafter's YaRN amplitude (select_draft_yarn_amplitude)
  // --draft-context-window: @draft attends only to the last N context positions (0: all). Needs
  // `draft`; negative refused. Larger than the plan's context: no effect.
  int64_t draft_context_window = 0;
  bool load_weights = true;                   // false: --no-weights (config only)
  std::optional<int64_t> layers;              // --layers N: the first N decoder layers
  std::string stop_after;                     // pass name; empty: the whole pipeline
  // KV cache positions the plan will hold (0: the target's max_position_embeddings): a
  // drafter's attention window at least this long changes nothing and is accepted.
  int64_t max_context = 0;
  BuildOptions build;
  // Checkpoint validation's progress: safetensors files opened of how many (the target's, then
  // the drafter's).
  SafetensorsCheckpoint::FileProgress on_files{};
};

struct CompileResult {
  std::optional<TargetCheckpoint> target;
  std::optional<DraftCheckpoint> draft;
  std::unique_ptr<ir::Module> module;  // after the pipeline (or after stop_after)
};

CompileResult compile_to_ir(const CompileOptions& options);

// Refuses a negative drafter context window, or one with no drafter, naming --draft-context-window.
void check_draft_context_window(int64_t n, bool have_draft);

}  // namespace kplan
