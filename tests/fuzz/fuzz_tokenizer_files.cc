// The tokenizer files a checkpoint or a plan carries, as Tokenizer::from_text reads them: the
// input is tiktoken.model's text, a NUL byte, then tokenizer_config.json's text (no NUL: the
// whole input is the model file). A tokenizer that loads then encodes the config text (with and
// without special tokens) and decodes every id it has: decode(encode(text)) must be the text,
// and each id must decode.
#include <string>
#include <vector>

#include "runtime/tokenizer/tiktoken_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string_view model = input.substr(0, nul);
  const std::string_view config = nul == std::string_view::npos ? std::string_view("{}") : input.substr(nul + 1);
  fuzz::refuse_cleanly([&] {
    const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_text(model, "tiktoken.model", config, "tokenizer_config.json");
    std::vector<int32_t> all;
    for (int32_t id = 0; id < t.num_ranks() + t.num_specials() && id < 4096; ++id) all.push_back(id);
    (void)t.decode(all);
    for (bool special : {true, false}) {
      std::vector<int32_t> ids;
      try {
        ids = t.encode(config, special);
      } catch (const Error&) {
        continue;  // not UTF-8
      }
      if (t.decode(ids) != config) fuzz::finding("decode(encode(text)) differs from the text");
    }
  });
  return 0;
}
