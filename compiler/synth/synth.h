#pragma once
// `kplan synth` as a library: writes a complete HuggingFace-format checkpoint directory
// (config.json, model.safetensors or shards + model.safetensors.index.json) with seeded random
// weights for a model config, and likewise a DFlash drafter. The tensor list comes from
// target_tensor_specs / draft_tensor_specs, so what synth writes is exactly what the frontend
// expects to read. Output is byte-identical for the same config and seed on any machine.
//
// Tests create checkpoints in temp dirs with e.g.
//   synthesize_target(preset_config("tiny"), dir, {.seed = 1});
//   synthesize_draft(preset_draft_config("tiny"), dir / "draft", {.seed = 1});
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "compiler/synth/presets.h"

namespace kplan {

struct SynthOptions {
  uint64_t seed = 0;
  // Split into model-0000N-of-0000M.safetensors when the weights exceed this many bytes;
  // 0: always one model.safetensors.
  uint64_t shard_bytes = 0;
  // Refuse to write checkpoints larger than this (a real-size config.json would fill the disk).
  uint64_t max_total_bytes = uint64_t{2} << 30;
  // The config.json to write; default: model_config_to_json / draft_config_to_json of the config.
  std::optional<nlohmann::json> config_json;
  // The weight bytes made so far of the checkpoint's total: (0, total) first, then after each
  // tensor is generated (a tensor at a time; may be empty).
  std::function<void(uint64_t done, uint64_t total)> on_progress{};
};

// What was written: file names relative to the output directory, config.json first.
struct SynthResult {
  std::vector<std::string> files;
  uint64_t weight_bytes = 0;
};

// Routed experts are written pack-quantized INT4 when config.quant.enabled (see
// k26_int4_quant_config); everything else bf16, e_score_correction_bias f32.
SynthResult synthesize_target(const ModelConfig& config, const std::filesystem::path& out_dir,
                              const SynthOptions& options = {});
SynthResult synthesize_draft(const DraftConfig& draft, const std::filesystem::path& out_dir,
                             const SynthOptions& options = {});

}  // namespace kplan
