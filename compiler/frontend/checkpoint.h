#pragma once
// A HuggingFace checkpoint directory opened for compilation: its config.json parsed and
// validated, and (unless structure-only) its safetensors opened by mmap with every tensor the
// config needs checked for presence, dtype and shape before anything is compiled. A target's
// extra tensors (a vision tower, MTP layers) are ignored; a drafter's are refused (below).
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"

namespace kplan {

enum class WeightsMode {
  Load,  // open the safetensors and validate every tensor against the config
  None,  // config only (`--no-weights`): structure-only compiles, e.g. of the real K2.6 config
};

// The target model (DeepSeek-V3 / Kimi K2 / K2.5-K2.6 text model).
class TargetCheckpoint {
 public:
  // `path`: the checkpoint directory, or its config.json (then only WeightsMode::None makes
  // sense unless the safetensors sit beside it). `layers`: only the first that many decoder
  // layers (slice_layers; their tensors alone are validated); unset: all.
  // `on_files`: the safetensors files opened so far, of how many (SafetensorsCheckpoint::open).
  static TargetCheckpoint open(const std::filesystem::path& path, WeightsMode mode = WeightsMode::Load,
                               std::optional<int64_t> layers = std::nullopt,
                               const SafetensorsCheckpoint::FileProgress& on_files = {});

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<TensorSpec>& specs() const { return specs_; }
  bool has_weights() const { return weights_ != nullptr; }
  // The opened tensors; throws kplan::Error when opened with WeightsMode::None.
  const SafetensorsCheckpoint& weights() const;

 private:
  std::filesystem::path dir_;
  ModelConfig config_;
  std::vector<TensorSpec> specs_;
  std::shared_ptr<SafetensorsCheckpoint> weights_;
};

// The DFlash drafter. Unlike the target's, its safetensors may hold nothing but the tensors its
// config names: an extra tensor (a DFlash2 convolution or selector, an embedding or lm_head of
// its own, quantization scales) would change what it computes, so it is refused by name.
struct DraftOpenOptions {
  // Resolves a `mask_token` string (the target's special tokens: target_special_tokens).
  std::optional<SpecialTokenLookup> tokens;
  // The YaRN cos/sin amplitude: "config", "legacy" or a number (select_draft_yarn_amplitude).
  std::string yarn_amplitude = "config";
  // The drafter context window (`kplan compile --draft-context-window`): DraftConfig::context_window.
  int64_t context_window = 0;
  // The safetensors files opened so far, of how many (SafetensorsCheckpoint::open).
  SafetensorsCheckpoint::FileProgress on_files{};
};

class DraftCheckpoint {
 public:
  static DraftCheckpoint open(const std::filesystem::path& path, WeightsMode mode = WeightsMode::Load,
                              const DraftOpenOptions& options = {});

  const std::filesystem::path& dir() const { return dir_; }
  const DraftConfig& config() const { return config_; }
  const std::vector<TensorSpec>& specs() const { return specs_; }
  bool has_weights() const { return weights_ != nullptr; }
  const SafetensorsCheckpoint& weights() const;

 private:
  std::filesystem::path dir_;
  DraftConfig config_;
  std::vector<TensorSpec> specs_;
  std::shared_ptr<SafetensorsCheckpoint> weights_;
};

// Checks every spec against the opened tensors: present, dtype, shape (and, for INT4
// weight_shape tensors, their [out, in] contents). Throws one kplan::Error naming the first few
// problems and how many there are in all; `where` names the checkpoint in the message.
void validate_checkpoint_tensors(const SafetensorsCheckpoint& tensors,
                                 const std::vector<TensorSpec>& specs, const std::string& where);
// Refuses tensors the specs do not name (the drafter's checkpoint), naming the first few and how
// many there are in all.
void refuse_unexpected_tensors(const SafetensorsCheckpoint& tensors, const std::vector<TensorSpec>& specs,
                               const std::string& where);

}  // namespace kplan
