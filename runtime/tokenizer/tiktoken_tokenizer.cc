#include "runtime/tokenizer/tiktoken_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <map>

#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "ir/support/regular_file.h"

namespace kplan::tokenizer {
namespace {

namespace fs = std::filesystem;

// Standard base64 (RFC 4648, '=' padding); nullopt on any other character or a bad length.
std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.empty() || in.size() % 4 != 0) return std::nullopt;
  size_t pad = 0;
  while (pad < 2 && in[in.size() - 1 - pad] == '=') ++pad;
  std::string out;
  uint32_t bits = 0;
  int nbits = 0;
  for (size_t i = 0; i < in.size() - pad; ++i) {
    const int v = value(in[i]);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<uint32_t>(v);
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      out.push_back(static_cast<char>((bits >> nbits) & 0xFF));
    }
  }
  return out;
}

// "bos_token": "[BOS]" or {"content": "[BOS]", ...}; nullopt when absent or null.
std::optional<std::string> token_content(const nlohmann::json& config, const char* key, const std::string& name) {
  if (!config.contains(key) || config[key].is_null()) return std::nullopt;
  const nlohmann::json& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw Error(name + ": '" + key + "' is neither a string nor an object with a string 'content'");
}

}  // namespace

Tokenizer Tokenizer::from_text(std::string_view model_text, const std::string& model_name,
                               std::string_view config_text, const std::string& config_name) {
  Tokenizer t;
  // Ranks: "base64 rank" per line; blank lines are skipped.
  std::map<int64_t, std::string> by_rank;
  size_t line_no = 0, pos = 0;
  while (pos < model_text.size()) {
    size_t end = model_text.find('\n', pos);
    if (end == std::string_view::npos) end = model_text.size();
    std::string_view line = model_text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::string where = model_name + ":" + std::to_string(line_no) + ": ";
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      throw Error(where + "expected 'base64-token rank', got '" + std::string(line.substr(0, 80)) + "'");
    const std::optional<std::string> bytes = base64_decode(line.substr(0, space));
    if (!bytes || bytes->empty()) throw Error(where + "token '" + std::string(line.substr(0, space)) + "' is not base64");
    const std::string_view rank_text = line.substr(space + 1);
    int64_t rank = -1;
    const auto [ptr, ec] = std::from_chars(rank_text.data(), rank_text.data() + rank_text.size(), rank);
    if (ec != std::errc() || ptr != rank_text.data() + rank_text.size() || rank < 0 || rank >= INT32_MAX - kReservedSpecialTokens)
      throw Error(where + "rank '" + std::string(rank_text) + "' is not a non-negative integer");
    if (!by_rank.emplace(rank, *bytes).second) throw Error(where + "rank " + std::to_string(rank) + " appears twice");
    if (!t.ranks_.emplace(*bytes, static_cast<int32_t>(rank)).second)
      throw Error(where + "token '" + std::string(line.substr(0, space)) + "' appears twice");
  }
  if (by_rank.empty()) throw Error(model_name + ": no ranks (empty file)");
  if (by_rank.rbegin()->first != static_cast<int64_t>(by_rank.size()) - 1) {
    int64_t missing = 0;
    while (by_rank.count(missing)) ++missing;
    throw Error(model_name + ": ranks must be 0.." + std::to_string(by_rank.size() - 1) + "; rank " +
                std::to_string(missing) + " is missing");
  }
  for (auto& [rank, bytes] : by_rank) t.rank_bytes_.push_back(std::move(bytes));

  // Specials: the config's added_tokens_decoder, and reserved names for the rest of the 256.
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception&) {
    throw Error(config_name + ": not valid JSON");
  }
  if (!config.is_object()) throw Error(config_name + ": expected a JSON object");
  const int32_t n_ranks = static_cast<int32_t>(t.rank_bytes_.size());
  std::map<int32_t, std::string> specials;
  if (config.contains("added_tokens_decoder")) {
    const nlohmann::json& added = config["added_tokens_decoder"];
    if (!added.is_object()) throw Error(config_name + ": 'added_tokens_decoder' is not an object");
    for (const auto& [key, entry] : added.items()) {
      int64_t id = -1;
      const auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || ptr != key.data() + key.size() || id < 0 || id > INT32_MAX)
        throw Error(config_name + ": added_tokens_decoder key '" + key + "' is not a token id");
      if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() ||
          entry["content"].get<std::string>().empty())
        throw Error(config_name + ": added_tokens_decoder[" + key + "] has no string 'content'");
      if (id < n_ranks)
        throw Error(config_name + ": special token id " + key + " collides with a rank of " + model_name +
                    " (ranks 0.." + std::to_string(n_ranks - 1) + ")");
      specials[static_cast<int32_t>(id)] = entry["content"].get<std::string>();
    }
  }
  for (int32_t id = n_ranks; id < n_ranks + kReservedSpecialTokens; ++id)
    specials.try_emplace(id, "<|reserved_token_" + std::to_string(id) + "|>");
  for (auto& [id, content] : specials) {
    if (t.special_id(content)) throw Error(config_name + ": special token '" + content + "' appears twice");
    t.specials_.push_back({id, std::move(content)});
  }
  for (const char* key : {"bos_token", "eos_token"}) {
    const std::optional<std::string> content = token_content(config, key, config_name);
    if (!content) continue;
    const std::optional<int32_t> id = t.special_id(*content);
    if (!id) throw Error(config_name + ": " + key + " '" + *content + "' is not a special token");
    (std::string_view(key) == "bos_token" ? t.bos_id_ : t.eos_id_) = id;
  }
  t.pre_ = std::make_shared<const PreTokenizer>();
  return t;
}

Tokenizer Tokenizer::from_dir(const fs::path& dir) {
  const fs::path model = dir / "tiktoken.model", config = dir / "tokenizer_config.json";
  std::error_code ec;  // a looping link is refused by read_regular_file below, not thrown here
  if (!fs::exists(model, ec) && !ec) throw Error("tokenizer: " + model.string() + " does not exist");
  if (!fs::exists(config, ec) && !ec)
    throw Error("tokenizer: " + config.string() + " does not exist (needed beside tiktoken.model)");
  return from_text(read_regular_file(model, "tokenizer file"), model.string(), read_regular_file(config, "tokenizer file"),
                   config.string());
}

std::optional<int32_t> Tokenizer::special_id(std::string_view content) const {
  for (const SpecialToken& s : specials_)
    if (s.content == content) return s.id;
  return std::nullopt;
}

void Tokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view piece : pre_->split(text)) byte_pair_encode(piece, ranks_, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  std::vector<int32_t> out;
  if (!allow_special) {
    encode_ordinary(text, out);
    return out;
  }
  // Each special's next occurrence at or after `pos`, recomputed only once `pos` passes it.
  std::vector<size_t> next(specials_.size(), 0);
  std::vector<bool> stale(specials_.size(), true);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best_at = std::string_view::npos, best = 0;
    for (size_t s = 0; s < specials_.size(); ++s) {
      if (stale[s] || (next[s] != std::string_view::npos && next[s] < pos)) {
        next[s] = text.find(specials_[s].content, pos);
        stale[s] = false;
      }
      // The earliest occurrence wins; at the same place the longest special does.
      if (next[s] < best_at ||
          (next[s] == best_at && best_at != std::string_view::npos &&
           specials_[s].content.size() > specials_[best].content.size()))
        best_at = next[s], best = s;
    }
    if (best_at == std::string_view::npos) {
      encode_ordinary(text.substr(pos), out);
      break;
    }
    encode_ordinary(text.substr(pos, best_at - pos), out);
    out.push_back(specials_[best].id);
    pos = best_at + specials_[best].content.size();
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id >= 0 && id < num_ranks()) {
      out += rank_bytes_[static_cast<size_t>(id)];
      continue;
    }
    const auto it = std::lower_bound(specials_.begin(), specials_.end(), id,
                                     [](const SpecialToken& s, int32_t v) { return s.id < v; });
    if (it == specials_.end() || it->id != id)
      throw Error("tokenizer: cannot decode token id " + std::to_string(id) + ": not in the vocabulary (" +
                  std::to_string(num_ranks()) + " ranks + " + std::to_string(num_specials()) + " specials)");
    out += it->content;
  }
  return out;
}

std::string Tokenizer::summary() const {
  return "tiktoken, " + std::to_string(num_ranks()) + " ranks + " + std::to_string(num_specials()) + " specials";
}

}  // namespace kplan::tokenizer
