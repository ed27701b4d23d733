// The two merge strategies of byte_pair_encode agree: the scan (tiktoken's algorithm, used for
// short pieces) and the heap (used for long ones), on random pieces over the bundled model's
// 4096 ranks and the synthetic ranks; and a 200,000-byte word goes through the tokenizer (the
// pre-tokenizer's JIT stack and the quadratic merge both failed on it) and decodes back.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/tiktoken_tokenizer.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan::tokenizer {
namespace {

std::string unbase64(const std::string& text) {
  static const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    acc = acc << 6 | static_cast<uint32_t>(abc.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>(acc >> bits & 0xFF);
    }
  }
  return out;
}

RankMap mini_v3_ranks() {
  std::ifstream in(std::string(KPLAN_SOURCE_DIR) + "/models/mini-v3/tiktoken.model");
  RankMap ranks;
  std::string b64;
  int32_t rank = 0;
  while (in >> b64 >> rank) ranks.emplace(unbase64(b64), rank);
  EXPECT_EQ(ranks.size(), 4096u);
  return ranks;
}

RankMap synthetic_ranks() {
  RankMap ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace(std::string(1, static_cast<char>(b)), b);
  int32_t r = 256;
  for (const std::string& m : test::synthetic_merges()) ranks.emplace(m, r++);
  return ranks;
}

void expect_strategies_agree(const RankMap& ranks, const std::string& alphabet, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t len = 1 + rng() % (trial < 250 ? 64 : 3000);
    std::string piece;
    for (size_t i = 0; i < len; ++i) piece += alphabet[rng() % alphabet.size()];
    std::vector<int32_t> scan, heap;
    byte_pair_encode_scan(piece, ranks, scan);
    byte_pair_encode_heap(piece, ranks, heap);
    ASSERT_EQ(scan, heap) << "piece of " << len << " bytes: " << piece.substr(0, 80);
  }
}

TEST(BpeMerge, HeapEqualsScanOnTheBundledRanks) {
  expect_strategies_agree(mini_v3_ranks(), "    self.def_return(x)\n\t=,:'abcdeinorst_", 1);
  expect_strategies_agree(mini_v3_ranks(), "aaaab", 2);  // long runs: many equal-rank ties
}

TEST(BpeMerge, HeapEqualsScanOnTheSyntheticRanks) {
  expect_strategies_agree(synthetic_ranks(), "the and 123 ing", 3);
}

TEST(BpeMerge, ALongWordIsEncodedAndDecodesBack) {
  const Tokenizer tok = Tokenizer::from_dir(std::string(KPLAN_SOURCE_DIR) + "/models/mini-v3");
  std::string word;
  for (int i = 0; i < 25000; ++i) word += "selfname";  // one lower-case word of 200,000 bytes
  const std::vector<int32_t> ids = tok.encode(word, false);  // the quadratic merge took hours on this
  EXPECT_EQ(tok.decode(ids), word);
  EXPECT_LT(ids.size(), word.size());
}

}  // namespace
}  // namespace kplan::tokenizer
