#pragma once
// A small synthetic Kimi-style tokenizer for tests: all 256 single bytes (rank = byte value), a
// few dozen English/digit merges at known ranks, then filler merges of control-byte pairs (bytes
// no test text uses) up to 768 ranks, so ranks + 256 specials cover the tiny preset's vocab of
// 1024. Named specials: 768 [BOS], 769 [EOS], 770 <|im_end|>, 771 <|im_user|>.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kplan::test {

inline std::string base64(const std::string& bytes) {
  static const char* abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = (unsigned char)bytes[i] << 16 | (unsigned char)bytes[i + 1] << 8 | (unsigned char)bytes[i + 2];
    out += {abc[v >> 18], abc[v >> 12 & 63], abc[v >> 6 & 63], abc[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = (unsigned char)bytes[i] << 16;
    out += {abc[v >> 18], abc[v >> 12 & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = (unsigned char)bytes[i] << 16 | (unsigned char)bytes[i + 1] << 8;
    out += {abc[v >> 18], abc[v >> 12 & 63], abc[v >> 6 & 63], '='};
  }
  return out;
}

// Merges from rank 256 on, in rank order.
inline const std::vector<std::string>& synthetic_merges() {
  static const std::vector<std::string> merges = {
      "th",     // 256
      "he",     // 257
      "the",    // 258
      " the",   // 259
      "in",     // 260
      "ng",     // 261
      "ing",    // 262
      " t",     // 263
      "er",     // 264
      "12",     // 265
      "123",    // 266
      "an",     // 267
      "and",    // 268
      " and",   // 269
      "on",     // 270
      "re",     // 271
      "es",     // 272
      "st",     // 273
      "en",     // 274
      "at",     // 275
      "or",     // 276
      "ed",     // 277
      "is",     // 278
      " is",    // 279
      "it",     // 280
      "ou",     // 281
      "ar",     // 282
      "00",     // 283
      "000",    // 284
      "  ",     // 285
      "\xE4\xB8",  // 286: the first two bytes of 中 (U+4E2D) and 为 ...
  };
  return merges;
}

inline constexpr int kSyntheticRanks = 768;

inline std::string synthetic_tiktoken_model() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const std::string& m : synthetic_merges()) tokens.push_back(m);
  // Filler: pairs of control bytes other than \t \n \r (no test text contains them).
  for (int a = 1; a < 32 && static_cast<int>(tokens.size()) < kSyntheticRanks; ++a)
    for (int b = 1; b < 32 && static_cast<int>(tokens.size()) < kSyntheticRanks; ++b) {
      if (a == 9 || a == 10 || a == 13 || b == 9 || b == 10 || b == 13) continue;
      tokens.push_back(std::string{static_cast<char>(a), static_cast<char>(b)});
    }
  std::string text;
  for (size_t r = 0; r < tokens.size(); ++r) text += base64(tokens[r]) + " " + std::to_string(r) + "\n";
  return text;
}

inline std::string synthetic_tokenizer_config() {
  return R"({
  "added_tokens_decoder": {
    "768": {"content": "[BOS]", "special": true},
    "769": {"content": "[EOS]", "special": true},
    "770": {"content": "<|im_end|>", "special": true},
    "771": {"content": "<|im_user|>", "special": true}
  },
  "bos_token": "[BOS]",
  "eos_token": {"content": "[EOS]"},
  "tokenizer_class": "TikTokenTokenizer"
})";
}

// Writes tiktoken.model and tokenizer_config.json into `dir`.
inline void write_synthetic_tokenizer(const std::filesystem::path& dir) {
  std::ofstream(dir / "tiktoken.model", std::ios::binary) << synthetic_tiktoken_model();
  std::ofstream(dir / "tokenizer_config.json", std::ios::binary) << synthetic_tokenizer_config();
}

}  // namespace kplan::test
