#pragma once
// A tiktoken-format BPE tokenizer as Kimi K2.x checkpoints ship it: `tiktoken.model` (one
// `base64-token rank` per line, ranks 0..N-1) and `tokenizer_config.json` (special tokens in
// `added_tokens_decoder`, bos/eos). Ids N..N+255 are special tokens; those the config does not
// name are `<|reserved_token_ID|>`, as tokenization_kimi.py does.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/pretokenizer.h"

namespace kplan::tokenizer {

inline constexpr int32_t kReservedSpecialTokens = 256;

struct SpecialToken {
  int32_t id;
  std::string content;
};

class Tokenizer {
 public:
  // Parses the two files' contents; `model_name` / `config_name` name them in errors (a malformed
  // rank line is reported as `model_name:LINE: ...`). Throws kplan::Error.
  static Tokenizer from_text(std::string_view model_text, const std::string& model_name,
                             std::string_view config_text, const std::string& config_name);
  // Loads DIR/tiktoken.model and DIR/tokenizer_config.json. Throws kplan::Error naming a missing file.
  static Tokenizer from_dir(const std::filesystem::path& dir);

  // Text to ids: special tokens written in the text become their ids when `allow_special`, else
  // they are encoded as ordinary text. Throws kplan::Error when the text is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text, bool allow_special = true) const;
  // Ids to bytes (special tokens to their content). Throws kplan::Error on an unknown id.
  std::string decode(std::span<const int32_t> ids) const;

  int64_t num_ranks() const { return static_cast<int64_t>(rank_bytes_.size()); }
  int64_t num_specials() const { return static_cast<int64_t>(specials_.size()); }
  const std::vector<SpecialToken>& specials() const { return specials_; }
  std::optional<int32_t> special_id(std::string_view content) const;
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }
  // "tiktoken, N ranks + M specials"
  std::string summary() const;

 private:
  Tokenizer() = default;
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  RankMap ranks_;                        // token bytes -> rank (= id)
  std::vector<std::string> rank_bytes_;  // id -> token bytes
  std::vector<SpecialToken> specials_;   // ascending ids
  std::optional<int32_t> bos_id_, eos_id_;
  std::shared_ptr<const PreTokenizer> pre_;
};

}  // namespace kplan::tokenizer
