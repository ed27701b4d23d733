// The bundled model's tokenizer (models/mini-v3) against the tokenizer it was trained with
// (tools/train/bpe.py, itself checked equal to the tiktoken library by check_export.py): held-out
// snippets and prompts (tests/data/mini-v3, written by tools/train/prepare_data.py) encode to the
// same ids, and ids decode back to the same bytes, one id at a time too, where a token holds
// part of a UTF-8 sequence.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/tokenizer/tiktoken_tokenizer.h"

namespace kplan::tokenizer {
namespace {

const std::string kModelDir = std::string(KPLAN_SOURCE_DIR) + "/models/mini-v3";
const std::string kDataDir = std::string(KPLAN_TEST_DATA_DIR) + "/mini-v3";

struct Sample {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Sample> read_samples(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<Sample> out;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  return out;
}

const Tokenizer& mini_v3() {
  static const Tokenizer tok = Tokenizer::from_dir(kModelDir);
  return tok;
}

TEST(MiniV3Tokenizer, HasTheTrainedRanksAndKimisSpecials) {
  EXPECT_EQ(mini_v3().num_ranks(), 4096);
  EXPECT_EQ(mini_v3().bos_id(), 4096);
  EXPECT_EQ(mini_v3().eos_id(), 4097);
  EXPECT_EQ(mini_v3().special_id("<|im_end|>"), 4098);
  EXPECT_EQ(mini_v3().special_id("<|dflash_mask|>"), 4350);  // the drafter's mask_token_id
}

TEST(MiniV3Tokenizer, EncodesHeldOutTextLikeTheTrainingTokenizer) {
  const auto samples = read_samples(kDataDir + "/tokenizer_sample.jsonl");
  ASSERT_GE(samples.size(), 40u);
  size_t tokens = 0;
  for (const Sample& s : samples) {
    EXPECT_EQ(mini_v3().encode(s.text, /*allow_special=*/false), s.ids) << s.text;
    EXPECT_EQ(mini_v3().decode(s.ids), s.text);
    tokens += s.ids.size();
  }
  EXPECT_GT(tokens, 2000u);  // a real sample, not a handful of words
}

TEST(MiniV3Tokenizer, DecodesOneIdAtATimeToTheSameBytesEvenMidCharacter) {
  bool saw_partial_utf8 = false;
  for (const Sample& s : read_samples(kDataDir + "/tokenizer_sample.jsonl")) {
    std::string joined;
    for (int32_t id : s.ids) {
      const std::string piece = mini_v3().decode(std::vector<int32_t>{id});
      for (unsigned char c : piece)
        if (c >= 0x80 && (piece.size() == 1 || (piece[0] & 0xC0) == 0x80)) saw_partial_utf8 = true;
      joined += piece;
    }
    EXPECT_EQ(joined, s.text);
  }
  EXPECT_TRUE(saw_partial_utf8) << "the sample should hold a token that is part of a UTF-8 sequence";
  // Every single-byte rank decodes to its byte, invalid UTF-8 on its own included.
  for (int32_t b = 0x80; b < 0x100; ++b)
    EXPECT_EQ(mini_v3().decode(std::vector<int32_t>{b}), std::string(1, static_cast<char>(b)));
}

TEST(MiniV3Tokenizer, EncodesTheHeldOutPromptsToIdsThatDecodeBack) {
  std::ifstream in(kDataDir + "/heldout_prompts.jsonl");
  std::string line;
  int prompts = 0;
  while (std::getline(in, line)) {
    const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
    const auto ids = mini_v3().encode(text, false);
    EXPECT_LT(ids.size(), text.size());  // merges happen: fewer ids than bytes
    EXPECT_EQ(mini_v3().decode(ids), text);
    ++prompts;
  }
  EXPECT_GE(prompts, 50);
}

}  // namespace
}  // namespace kplan::tokenizer
