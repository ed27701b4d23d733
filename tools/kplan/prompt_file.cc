#include "tools/kplan/prompt_file.h"

#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "ir/support/regular_file.h"

namespace kplan::cli {

namespace {

constexpr const char* kExpected = R"(expected an object {"text": "..."} or {"ids": [1, 2, 3]})";

// nlohmann's message without its "[json.exception.parse_error.101] " tag.
std::string parse_reason(const nlohmann::json::exception& e) {
  std::string reason = e.what();
  const size_t tag_end = reason.find("] ");
  return tag_end == std::string::npos ? reason : reason.substr(tag_end + 2);
}

PromptLine parse_prompt(const std::string& text, int64_t line, const std::string& context) {
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(context + "not JSON (" + parse_reason(e) + "); " + kExpected);
  }
  if (!value.is_object()) throw Error(context + kExpected + ", got a JSON " + value.type_name());
  const bool has_text = value.contains("text"), has_ids = value.contains("ids");
  if (has_text == has_ids)
    throw Error(context + (has_text ? R"(give "text" or "ids", not both)" : R"(no "text" or "ids" key; )" +
                                                                               std::string(kExpected)));
  PromptLine prompt;
  prompt.line = line;
  if (has_text) {
    const nlohmann::json& t = value["text"];
    if (!t.is_string()) throw Error(context + R"("text" must be a string, got a JSON )" + t.type_name());
    prompt.text = t.get<std::string>();
    if (prompt.text->empty()) throw Error(context + R"("text" is empty)");
    return prompt;
  }
  const nlohmann::json& ids = value["ids"];
  if (!ids.is_array()) throw Error(context + R"("ids" must be an array of token ids, got a JSON )" + ids.type_name());
  if (ids.empty()) throw Error(context + R"("ids" is empty)");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer())
      throw Error(context + R"("ids" entry )" + std::to_string(i + 1) + " is not an integer token id (a JSON " +
                  ids[i].type_name() + ")");
    // Unsigned values past int64 read as huge; the vocabulary check refuses them by value.
    prompt.ids.push_back(ids[i].is_number_unsigned() && ids[i].get<uint64_t>() > INT64_MAX ? INT64_MAX
                                                                                            : ids[i].get<int64_t>());
  }
  return prompt;
}

}  // namespace

std::string prompt_line_context(const std::string& path, int64_t line) {
  return "PROMPTS '" + path + "' line " + std::to_string(line) + ": ";
}

std::vector<PromptLine> read_prompt_file(const std::string& path) {
  const std::string bytes = read_regular_file(path, "PROMPTS file");
  std::vector<PromptLine> prompts;
  int64_t line = 0;
  for (size_t start = 0; start < bytes.size();) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    std::string text = bytes.substr(start, end - start);
    start = end + 1;
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    prompts.push_back(parse_prompt(text, line, prompt_line_context(path, line)));
  }
  if (prompts.empty())
    throw Error("PROMPTS '" + path + "' holds no prompts (one JSON object per line: " + R"({"text": "..."} or {"ids": [1, 2, 3]}))");
  return prompts;
}

}  // namespace kplan::cli
