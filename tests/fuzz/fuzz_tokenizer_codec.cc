// The bundled pair's tokenizer (models/mini-v3: tiktoken.model + tokenizer_config.json) on
// arbitrary input: the first byte picks the operation, the rest is the operand.
//   even: encode the bytes (special tokens allowed when bit 1 is set): text that is not UTF-8 is
//         refused by kplan::Error; valid UTF-8 of any length must encode (a refusal is a finding:
//         real text has 5,000-letter words and base64 blobs) and decode back to itself;
//   odd:  decode the bytes as little-endian int32 ids: an id outside the vocabulary is refused
//         by kplan::Error naming it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/tokenizer/tiktoken_tokenizer.h"
#include "tests/fuzz/fuzz_support.h"

#ifndef KPLAN_SOURCE_DIR
#error "KPLAN_SOURCE_DIR must name the source tree (models/mini-v3)"
#endif

using namespace kplan;

namespace {

// RFC 3629 UTF-8, as PCRE2's PCRE2_UTF checks it: no overlong forms, no surrogates, at most U+10FFFF.
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07;
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += n + 1;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // $KPLAN_SOURCE_DIR, when set, names the tree instead (a staged binary run from another checkout).
  static const tokenizer::Tokenizer t = tokenizer::Tokenizer::from_dir(
      std::string(std::getenv("KPLAN_SOURCE_DIR") ? std::getenv("KPLAN_SOURCE_DIR") : KPLAN_SOURCE_DIR) +
      "/models/mini-v3");
  if (size == 0) return 0;
  const uint8_t op = data[0];
  const std::string_view rest = fuzz::as_text(data + 1, size - 1);
  fuzz::refuse_cleanly([&] {
    if (op & 1) {
      std::vector<int32_t> ids(rest.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      (void)t.decode(ids);
      return;
    }
    std::vector<int32_t> ids;
    try {
      ids = t.encode(rest, (op & 2) != 0);
    } catch (const Error& e) {
      if (valid_utf8(rest)) fuzz::finding(std::string("valid UTF-8 text refused by encode: ") + e.what());
      throw;
    }
    if (t.decode(ids) != rest) fuzz::finding("decode(encode(text)) differs from the text");
  });
  return 0;
}
