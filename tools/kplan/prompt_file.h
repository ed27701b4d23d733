#pragma once
// The PROMPTS file of `kplan bench --acceptance`: JSON lines, one prompt per line, either
// {"text": "..."} (tokenized by the model's tokenizer) or {"ids": [1, 2, 3]}; other keys (e.g. a
// "source" naming where the prompt came from) are ignored, blank lines skipped. A bad line is
// refused by its number.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kplan::cli {

struct PromptLine {
  int64_t line = 0;                 // 1-based line number in the file
  std::optional<std::string> text;  // {"text": ...}
  std::vector<int64_t> ids;         // {"ids": [...]}: integers, not yet checked against a vocabulary
};

// Throws kplan::Error "PROMPTS '<path>' line N: ..." for a bad line, and for a file that cannot
// be read or holds no prompt.
std::vector<PromptLine> read_prompt_file(const std::string& path);

// "PROMPTS '<path>' line N: " — the prefix of every error about one prompt.
std::string prompt_line_context(const std::string& path, int64_t line);

}  // namespace kplan::cli
