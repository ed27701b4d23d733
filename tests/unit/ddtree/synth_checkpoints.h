#pragma once
// Synthesised test checkpoints (a preset target and its DFlash drafter, seed 1), written once
// per test process into a temp directory (removed at exit).
#include <filesystem>
#include <map>
#include <string>

#include "compiler/synth/presets.h"
#include "compiler/synth/synth.h"
#include "tests/unit/test_support.h"

namespace kplan::test {

struct SynthCheckpoint {
  std::filesystem::path target, draft;
};

inline const SynthCheckpoint& synth_checkpoint(const std::string& preset) {
  static testing_util::TempDir temp_root("ddtree");  // removed when the process exits
  static std::map<std::string, SynthCheckpoint> made;
  auto it = made.find(preset);
  if (it != made.end()) return it->second;
  const auto root = temp_root.path() / preset;
  SynthCheckpoint c{root / "target", root / "draft"};
  std::filesystem::create_directories(root);
  synthesize_target(preset_config(preset), c.target, {.seed = 1});
  synthesize_draft(preset_draft_config(preset), c.draft, {.seed = 1});
  return made.emplace(preset, c).first->second;
}

}  // namespace kplan::test
