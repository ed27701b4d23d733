#include "runtime/tokenizer/tokenizer_bundle.h"


#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "ir/support/regular_file.h"
#include "runtime/tokenizer/chat_template.h"

namespace kplan::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kplan-tiktoken-1";
constexpr const char* kModelFile = "tiktoken.model";
constexpr const char* kConfigFile = "tokenizer_config.json";
constexpr const char* kChatTemplateFile = "chat_template.jinja";

// The bundle's JSON, or a discarded value when `bytes` is not a bundle.
nlohmann::json parse_bundle(std::span<const uint8_t> bytes) {
  if (bytes.empty() || bytes.front() != '{') return nlohmann::json(nlohmann::json::value_t::discarded);
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

}  // namespace

// Any entry named tiktoken.model counts (a FIFO or a looping link too): reading it then says
// what is wrong with it, rather than the tokenizer being silently left out.
bool has_tokenizer_files(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir / kModelFile, ec);
  return !ec && st.type() != fs::file_type::not_found;
}

std::vector<uint8_t> bundle_tokenizer_files(const fs::path& dir) {
  Tokenizer::from_dir(dir);  // refuse to carry files the runtime could not load
  nlohmann::json j;
  j["format"] = kFormat;
  j[kModelFile] = read_regular_file(dir / kModelFile, "tokenizer file");
  j[kConfigFile] = read_regular_file(dir / kConfigFile, "tokenizer file");
  // A chat_template.jinja beside them (newer transformers save the template there): carried as
  // is; it is parsed when a conversation is rendered, so a template outside kplan's Jinja subset
  // does not stop a compile.
  std::error_code ec;
  if (fs::symlink_status(dir / kChatTemplateFile, ec).type() != fs::file_type::not_found && !ec)
    j[kChatTemplateFile] = read_regular_file(dir / kChatTemplateFile, "chat template file");
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  return std::vector<uint8_t>(text.begin(), text.end());
}

bool is_tokenizer_bundle(std::span<const uint8_t> bytes) { return !parse_bundle(bytes).is_discarded(); }

Tokenizer tokenizer_from_bundle(std::span<const uint8_t> bytes, const std::string& source) {
  const nlohmann::json j = parse_bundle(bytes);
  if (j.is_discarded() || !j.contains(kModelFile) || !j[kModelFile].is_string() || !j.contains(kConfigFile) ||
      !j[kConfigFile].is_string())
    throw Error(source + ": the plan's tokenizer data is not a kplan tiktoken bundle");
  return Tokenizer::from_text(j[kModelFile].get<std::string>(), source + " (tiktoken.model)",
                              j[kConfigFile].get<std::string>(), source + " (tokenizer_config.json)");
}

std::optional<BundledChatTemplate> chat_template_from_bundle(std::span<const uint8_t> bytes, const std::string& source) {
  const nlohmann::json j = parse_bundle(bytes);
  if (j.is_discarded() || !j.contains(kConfigFile) || !j[kConfigFile].is_string()) return std::nullopt;
  const nlohmann::json config =
      nlohmann::json::parse(j[kConfigFile].get<std::string>(), nullptr, /*allow_exceptions=*/false);
  std::optional<std::string> jinja;
  if (j.contains(kChatTemplateFile) && j[kChatTemplateFile].is_string()) jinja = j[kChatTemplateFile].get<std::string>();
  const std::optional<std::string> text = select_chat_template(config, jinja, source + " (tokenizer_config.json)");
  if (!text) return std::nullopt;
  BundledChatTemplate t;
  t.text = *text;
  t.origin = jinja ? kChatTemplateFile : "tokenizer_config.json's chat_template";
  t.bos_token = special_token_text(config, "bos_token");
  t.eos_token = special_token_text(config, "eos_token");
  return t;
}

}  // namespace kplan::tokenizer
