// The tiktoken tokenizer over the synthetic ranks of synthetic_tokenizer.h: hand-derived ids for
// byte-pair merges, round trips over ASCII, multibyte UTF-8, emoji and Han, special tokens, and
// clear errors for unknown ids.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/tokenizer/tiktoken_tokenizer.h"
#include "tests/unit/test_support.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

const Tokenizer& tok() {
  static const Tokenizer t = Tokenizer::from_text(test::synthetic_tiktoken_model(), "tiktoken.model",
                                                  test::synthetic_tokenizer_config(), "tokenizer_config.json");
  return t;
}

TEST(Tokenizer, CountsRanksAndSpecials) {
  EXPECT_EQ(tok().num_ranks(), test::kSyntheticRanks);
  EXPECT_EQ(tok().num_specials(), kReservedSpecialTokens);
  EXPECT_EQ(tok().summary(), "tiktoken, 768 ranks + 256 specials");
  EXPECT_EQ(tok().bos_id(), 768);
  EXPECT_EQ(tok().eos_id(), 769);
  EXPECT_EQ(tok().special_id("<|im_end|>"), 770);
  EXPECT_EQ(tok().special_id("<|reserved_token_900|>"), 900);  // unnamed ids get reserved names
}

TEST(Tokenizer, EncodesByLowestRankMerges) {
  // "the" is a token; " thing": th(256) first, then in(260), then ing(262); " th" is no token.
  EXPECT_EQ(tok().encode("the thing"), (Ids{258, 32, 256, 262}));
  EXPECT_EQ(tok().encode("thing"), (Ids{256, 262}));
  EXPECT_EQ(tok().encode(" the"), (Ids{259}));
  // "The": no "Th"; "he" merges.
  EXPECT_EQ(tok().encode("The"), (Ids{'T', 257}));
  // Digits in groups of three: "123" + "45"; "45" has no merge.
  EXPECT_EQ(tok().encode("12345"), (Ids{266, '4', '5'}));
  EXPECT_EQ(tok().encode("1000000"), (Ids{'1', 283, 284, '0'}));  // "100" = 1 + 00, "000", "0"
  // " and": the whole piece is a token.
  EXPECT_EQ(tok().encode("cats and"), (Ids{'c', 275, 's', 269}));
  // 中 = E4 B8 AD, 文 = E6 96 87: only the pair E4 B8 merges.
  EXPECT_EQ(tok().encode("中文"), (Ids{286, 0xAD, 0xE6, 0x96, 0x87}));
}

TEST(Tokenizer, MergeOrderFollowsRanksNotPosition) {
  // "ings": in(260) < ng(261), so i+n merge first, then in+g; "ings" is no token.
  EXPECT_EQ(tok().encode("ings"), (Ids{262, 's'}));
  // "ster": st(273) and er(264): er has the lower rank and merges first; "ster" is no token.
  EXPECT_EQ(tok().encode("ster"), (Ids{273, 264}));
  // "tes": "es"(272) merges, then "tes" is no token.
  EXPECT_EQ(tok().encode("tes"), (Ids{'t', 272}));
}

TEST(Tokenizer, RoundTrips) {
  for (const std::string s : {"the thing and the other thing", "Hello, World! 12345 x=3.14;\n\tEnd.  ",
                              "héllo wörld, ça va? naïve café", "emoji 😀🎉👍🏽 mixed", "中文测试，你好世界！我们hello",
                              "日本語のテキスト and 한국어", "line one\r\nline two\n\n\n", ""})
    EXPECT_EQ(tok().decode(tok().encode(s)), s) << s;
}

TEST(Tokenizer, SpecialTokensWhenAllowed) {
  EXPECT_EQ(tok().encode("[BOS]the<|im_end|>"), (Ids{768, 258, 770}));
  EXPECT_EQ(tok().encode("<|im_user|>the thing[EOS]"), (Ids{771, 258, 32, 256, 262, 769}));
  EXPECT_EQ(tok().encode("<|reserved_token_800|>"), (Ids{800}));
  const Ids plain = tok().encode("[BOS]the", /*allow_special=*/false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 768), 0);
  EXPECT_EQ(tok().decode(plain), "[BOS]the");
  EXPECT_EQ(tok().decode(Ids{768, 258, 769}), "[BOS]the[EOS]");
}

TEST(Tokenizer, UnknownIdOnDecodeIsAClearError) {
  testing_util::expect_contains(testing_util::error_of([] { tok().decode(Ids{258, 1024}); }),
                                {"token id 1024", "768 ranks + 256 specials"});
  testing_util::expect_contains(testing_util::error_of([] { tok().decode(Ids{-1}); }), {"token id -1"});
}

}  // namespace
}  // namespace kplan::tokenizer
