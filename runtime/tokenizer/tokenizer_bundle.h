#pragma once
// The tokenizer files carried inside a .kplan plan (its `tokenizer` bytes): a JSON object
// {"format": "kplan-tiktoken-1", "tiktoken.model": text, "tokenizer_config.json": text}, so a
// plan tokenizes exactly like the checkpoint directory it was compiled from; and, when the
// checkpoint ships one, "chat_template.jinja": text (an optional key: plans from before it read as
// before, and a reader from before it ignores it). The chat template is chat_template.jinja's when
// there is one, else tokenizer_config.json's `chat_template` (chat_template.h).
#include <cstdint>
#include <filesystem>
#include <optional>
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

// The chat template a bundle carries and the special tokens the template may print.
struct BundledChatTemplate {
  std::string text;    // the Jinja source
  std::string origin;  // "chat_template.jinja" or "tokenizer_config.json's chat_template"
  std::string bos_token, eos_token;  // tokenizer_config.json's, as text ("" when absent)
};

// nullopt when the bundle has no template (or `bytes` is not a bundle). Throws kplan::Error
// (naming `source`) on a malformed chat_template entry.
std::optional<BundledChatTemplate> chat_template_from_bundle(std::span<const uint8_t> bytes, const std::string& source);

}  // namespace kplan::tokenizer
