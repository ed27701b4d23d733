#pragma once
// The tokenizer files carried inside a .kplan plan (its `tokenizer` bytes): a JSON object
// {"format": "kplan-tiktoken-1", "tiktoken.model": text, "tokenizer_config.json": text}, so a
// plan tokenizes exactly like the checkpoint directory it was compiled from.
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "runtime/tokenizer/tiktoken_tokenizer.h"

namespace kplan::tokenizer {

// True when DIR holds tiktoken.model (tokenizer_config.json is then required beside it).
bool has_tokenizer_files(const std::filesystem::path& dir);

// The bundle of DIR's tokenizer files, validated by loading them. Throws kplan::Error.
std::vector<uint8_t> bundle_tokenizer_files(const std::filesystem::path& dir);

// True when `bytes` is such a bundle (older plans may hold a raw tokenizer.json instead).
bool is_tokenizer_bundle(std::span<const uint8_t> bytes);

// The tokenizer in a bundle; `source` names the plan in errors. Throws kplan::Error.
Tokenizer tokenizer_from_bundle(std::span<const uint8_t> bytes, const std::string& source);

}  // namespace kplan::tokenizer
