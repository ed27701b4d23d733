#include "runtime/tokenizer/tokenizer_bundle.h"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "ir/support/error.h"

namespace kplan::tokenizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "kplan-tiktoken-1";
constexpr const char* kModelFile = "tiktoken.model";
constexpr const char* kConfigFile = "tokenizer_config.json";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("tokenizer: cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The bundle's JSON, or a discarded value when `bytes` is not a bundle.
nlohmann::json parse_bundle(std::span<const uint8_t> bytes) {
  if (bytes.empty() || bytes.front() != '{') return nlohmann::json(nlohmann::json::value_t::discarded);
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("format") || j["format"] != kFormat)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return j;
}

}  // namespace

bool has_tokenizer_files(const fs::path& dir) { return fs::is_regular_file(dir / kModelFile); }

std::vector<uint8_t> bundle_tokenizer_files(const fs::path& dir) {
  Tokenizer::from_dir(dir);  // refuse to carry files the runtime could not load
  nlohmann::json j;
  j["format"] = kFormat;
  j[kModelFile] = read_file(dir / kModelFile);
  j[kConfigFile] = read_file(dir / kConfigFile);
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
