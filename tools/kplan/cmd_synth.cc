// kplan synth: writes a HuggingFace-format checkpoint with seeded random weights, from a named
// preset or from any config.json, and optionally a matching DFlash drafter.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "compiler/synth/synth.h"
#include "ir/support/error.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/phase.h"

namespace kplan::cli {

namespace {

struct SynthArgs {
  std::string preset;
  std::string config_file;
  std::string out_dir;
  std::string draft_dir;
  bool int4 = false;
  uint64_t seed = 0;
  uint64_t shard_mb = 0;
};

nlohmann::json read_json(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw Error("cannot read " + file);
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(file + ": not valid JSON (" + e.what() + ")");
  }
}

void run_synth(const SynthArgs& a) {
  if (a.preset.empty() == a.config_file.empty())
    throw Error("synth: give either a PRESET or --config FILE (presets: tiny, tiny2, tiny-yarn)");
  if (!a.draft_dir.empty() &&
      std::filesystem::weakly_canonical(a.draft_dir) == std::filesystem::weakly_canonical(a.out_dir))
    throw Error("synth: --draft " + a.draft_dir + " is the --out directory; the drafter needs its own");

  SynthOptions options;
  options.seed = a.seed;
  options.shard_bytes = a.shard_mb << 20;

  ModelConfig config;
  DraftConfig draft;
  if (!a.preset.empty()) {
    config = preset_config(a.preset);
    draft = preset_draft_config(a.preset);
    if (a.int4) config.quant = k26_int4_quant_config();
  } else {
    // A given config.json is written back verbatim (wrappers like kimi_k25 included), so the
    // tensor names synth writes are the ones that file implies.
    nlohmann::json j = read_json(a.config_file);
    config = parse_model_config(j, a.config_file);
    if (a.int4 && !config.quant.enabled) {
      config.quant = k26_int4_quant_config();
      j["quantization_config"] = model_config_to_json(config)["quantization_config"];
    }
    options.config_json = j;
    draft = draft_config_for(config);
  }

  // A K2.6-sized slice takes a minute: a bar over the weight bytes generated.
  Phase phase("kplan synth", "writing " + a.out_dir, false);
  options.on_progress = [&phase](uint64_t done, uint64_t total) { phase.progress(done, total); };
  SynthResult target = synthesize_target(config, a.out_dir, options);
  phase.done();
  std::printf("wrote %s (%zu files, %llu weight bytes)\n", a.out_dir.c_str(), target.files.size(),
              static_cast<unsigned long long>(target.weight_bytes));
  if (!a.draft_dir.empty()) {
    SynthOptions draft_options = options;
    draft_options.config_json.reset();
    Phase draft_phase("kplan synth", "writing " + a.draft_dir, false);
    draft_options.on_progress = [&draft_phase](uint64_t done, uint64_t total) { draft_phase.progress(done, total); };
    SynthResult d = synthesize_draft(draft, a.draft_dir, draft_options);
    draft_phase.done();
    std::printf("wrote %s (%zu files, %llu weight bytes)\n", a.draft_dir.c_str(), d.files.size(),
                static_cast<unsigned long long>(d.weight_bytes));
  }
}

}  // namespace

void register_synth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand(
      "synth", "Write a HuggingFace-format checkpoint with seeded random weights (for tests)");
  cmd->add_option("preset", args->preset, "Named model shape: tiny, tiny2, tiny-yarn");
  cmd->add_option("--config", args->config_file, "Take the model shape from this config.json instead")
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out_dir, "Output checkpoint directory")->required();
  cmd->add_option("--draft", args->draft_dir, "Also write a DFlash drafter checkpoint here");
  cmd->add_flag("--int4", args->int4, "Routed experts as compressed-tensors pack-quantized INT4");
  cmd->add_option("--seed", args->seed, "Random seed (same seed: byte-identical files)")
      ->capture_default_str();
  cmd->add_option("--shard-mb", args->shard_mb,
                  "Shard the weights into files of at most N MiB (0: one model.safetensors)")
      ->capture_default_str();
  cmd->callback([args] { run_synth(*args); });
}

}  // namespace kplan::cli
