#include "compiler/frontend/eos_ids.h"

#include <algorithm>
#include <string>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/json_fields.h"
#include "ir/support/error.h"

namespace kplan {

namespace fs = std::filesystem;

std::vector<int64_t> checkpoint_eos_ids(const fs::path& dir, const ModelConfig& config) {
  std::vector<int64_t> ids = config.eos_token_ids;
  auto add = [&](int64_t id) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  std::error_code ec;
  const fs::path generation = dir / "generation_config.json";
  if (fs::is_regular_file(generation, ec)) {
    const nlohmann::json j = read_json_file(generation.string());
    if (!j.is_object()) throw Error(generation.string() + ": expected a JSON object");
    JsonFields g(j, generation.string());
    if (g.has("eos_token_id")) {
      const std::vector<int64_t> found = g.json().at("eos_token_id").is_array() ? g.req_int_list("eos_token_id")
                                                                               : std::vector<int64_t>{g.req_int("eos_token_id")};
      for (int64_t id : found) {
        if (id < 0 || id >= config.vocab_size)
          g.fail("eos_token_id", "token id " + std::to_string(id) + " outside the vocabulary [0, " +
                                     std::to_string(config.vocab_size) + ")");
        add(id);
      }
    }
  }
  if (const std::optional<SpecialTokenLookup> tokens = target_special_tokens(dir)) {
    const fs::path file = dir / "tokenizer_config.json";
    const nlohmann::json j = read_json_file(file.string());
    std::vector<std::string> names;
    if (j.is_object() && j.contains("eos_token")) {
      const nlohmann::json& e = j.at("eos_token");  // "[EOS]" or {"content": "[EOS]", ...}
      if (e.is_string()) names.push_back(e.get<std::string>());
      else if (e.is_object() && e.contains("content") && e.at("content").is_string())
        names.push_back(e.at("content").get<std::string>());
    }
    names.push_back("<|im_end|>");
    for (const std::string& name : names)
      if (const std::optional<int64_t> id = tokens->find(name); id && *id >= 0 && *id < config.vocab_size) add(*id);
  }
  return ids;
}

}  // namespace kplan
