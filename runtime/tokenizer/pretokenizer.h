#pragma once
// The pre-tokenizer: a regular expression splits text into pieces before byte-pair merging, as
// tiktoken does. Run with PCRE2 in UTF + UCP mode (Unicode properties for \p, \s, \d).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kplan::tokenizer {

// Kimi K2.x's pat_str (tokenization_kimi.py) in PCRE2 syntax. Upstream writes the letter classes
// as intersections (`[\p{Lu}...\p{M}&&[^\p{Han}]]`), which PCRE2 lacks; each is written here as
// a per-character negative lookahead on Han followed by the class.
const std::string& kimi_pattern();

class PreTokenizer {
 public:
  // Throws kplan::Error naming the offset when `pattern` does not compile.
  explicit PreTokenizer(const std::string& pattern = kimi_pattern());
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The pieces of `text` in order (views into it); their concatenation is `text`. Throws
  // kplan::Error when `text` is not valid UTF-8.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace kplan::tokenizer
