#pragma once
// The DFlash block-diffusion drafter's config.json: Qwen3-style decoder layers (q_norm/k_norm,
// GQA) that attend non-causally over [context features ; block], plus the DFlash fields
// (block_size, dflash_config.target_layer_ids, mask_token_id). The drafter has no embedding or
// lm_head of its own; it uses the target's.
//
// Both published layouts are read as they are (docs/drafter-configs.md lists every key and what
// kplan does with it):
// - z-lab's (K2.5/K2.6 DFlash): `architectures: ["DFlashDraftModel"]`, `model_type: qwen3`,
//   top-level `block_size` and `num_target_layers`, `dflash_config.{target_layer_ids,
//   mask_token_id}`, YaRN in `rope_scaling` or `rope_parameters`;
// - NVIDIA Model-Optimizer's export: the same plus `dflash_config.{causal, use_swa,
//   swa_window_size, attention_sink_bias, projector_type, num_target_layers}`, a top-level
//   `sliding_window` while `layer_types` stays all full_attention, `quantization_config`,
//   the model fields possibly nested in `text_config`.
// A DFlash field is looked up in dflash_config, then in the model object (text_config when
// present), then at the top level. What kplan cannot run is refused by the field's name.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compiler/frontend/model_config.h"

namespace kplan {

// Resolves a special token's text (a drafter's `mask_token`, e.g. "<|MASK|>") to its id in the
// target's vocabulary; nullopt when the tokenizer has no such token. `source` names where the
// tokens came from, for errors.
struct SpecialTokenLookup {
  std::string source;
  std::function<std::optional<int64_t>(const std::string&)> find;
};

// The special tokens of the target's tokenizer_config.json (`added_tokens_decoder`: id ->
// {"content": ...}) in `target_dir`; nullopt when the directory has no tokenizer_config.json.
std::optional<SpecialTokenLookup> target_special_tokens(const std::filesystem::path& target_dir);

// `tokens`: resolves a `mask_token` string when the config gives no mask_token_id; without it
// such a config is refused, saying how to give the id.
DraftConfig parse_draft_config(const nlohmann::json& j, const std::string& source,
                               const std::optional<SpecialTokenLookup>& tokens = std::nullopt);
DraftConfig load_draft_config(const std::filesystem::path& config_json,
                              const std::optional<SpecialTokenLookup>& tokens = std::nullopt);
nlohmann::json draft_config_to_json(const DraftConfig& c);

// The reference's target layers when a config names none (z-lab dflash `build_target_layer_ids`):
// one drafter layer taps the middle target layer; n > 1 layers tap layers spread evenly over
// [1, num_target_layers - 3], rounded half to even (K2.6: 61 target, 6 drafter layers ->
// 1, 12, 24, 35, 47, 58).
std::vector<int64_t> derive_target_layer_ids(int64_t num_target_layers, int64_t num_draft_layers);

// The drafter's YaRN cos/sin amplitude, chosen at compile time. The config's rule (`config`:
// an explicit attention_factor, else transformers' mscale / mscale_all_dim ratio: 1.0 for K2.6)
// is the default; `legacy` is 1 + 0.1 ln(factor) (older transformers and some servers, 1.4159
// for factor 64); a positive number is used as given. Throws for an unknown choice, or for a
// drafter without YaRN when the choice is not `config`.
void select_draft_yarn_amplitude(DraftConfig& d, const std::string& choice);

// Refuses a drafter that does not fit the target (hidden size, vocab, layer ids), by name, and
// a sliding window smaller than the positions a plan of this target can reach (the target's
// max_position_embeddings, or `max_context` when given).
void check_draft_fits_target(const DraftConfig& draft, const ModelConfig& target, int64_t max_context = 0);
// The window check alone: kplan's drafter attention has no per-query sliding window (its context
// window, --draft-context-window, is another semantics), so a config's window is accepted only
// where it changes nothing (window >= max_context: every key of the context is inside it).
void check_draft_window(const DraftConfig& draft, int64_t max_context);

}  // namespace kplan
