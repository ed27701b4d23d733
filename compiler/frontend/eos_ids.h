#pragma once
// The EOS ids a decode stops at, gathered from everything a checkpoint publishes: config.json's
// eos_token_id (already in the config), generation_config.json's eos_token_id (an int or a list:
// what transformers' generate() stops at), and the tokenizer's end tokens in tokenizer_config.json
// (its eos_token, and <|im_end|>, the end of a chat turn in Kimi's / ChatML templates, which is
// not config.json's EOS: a K2.6 chat reply would otherwise run to the token limit). The plan
// carries the merged list (ModelSpec.eos_token_ids); `kplan run --ignore-eos` ignores them all.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "compiler/frontend/model_config.h"

namespace kplan {

// config.eos_token_ids followed by the others found in `dir`, each once, in that order. Throws
// kplan::Error naming the file and field when generation_config.json's eos_token_id is not an id
// (or a list of them) inside the vocabulary.
std::vector<int64_t> checkpoint_eos_ids(const std::filesystem::path& dir, const ModelConfig& config);

}  // namespace kplan
