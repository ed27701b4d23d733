#include "runtime/tokenizer/tokenizer_bundle.h"


#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "ir/support/regular_file.h"

namespace kplan::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kplan-tiktoken-1";
constexpr const char* kModelFile = "tiktoken.model";
constexpr const char* kConfigFile = "tokenizer_config.json";

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

}  // namespace kplan::tokenizer
