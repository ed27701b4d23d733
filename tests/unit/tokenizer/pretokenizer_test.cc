// The Kimi pre-tokenizer regex under PCRE2: it compiles, and splits text into the pieces the
// upstream pattern gives (contractions kept on words, digits in groups of 1-3, Han runs alone,
// tiktoken's whitespace rules, punctuation runs with their trailing newlines).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/tokenizer/pretokenizer.h"
#include "tests/unit/test_support.h"

namespace kplan::tokenizer {
namespace {

std::vector<std::string> split(const std::string& text) {
  static const PreTokenizer pre;
  std::vector<std::string> out;
  for (std::string_view p : pre.split(text)) out.emplace_back(p);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, KimiPatternCompilesWithPcre2) {
  EXPECT_NO_THROW(PreTokenizer{});
  EXPECT_EQ(kimi_pattern().find("&&"), std::string::npos);  // no class intersections left
}

TEST(PreTokenizer, BadPatternIsAClearError) {
  testing_util::expect_contains(testing_util::error_of([] { PreTokenizer p("(?:unclosed[a-z"); }),
                                {"pre-tokenizer regex does not compile", "offset"});
}

TEST(PreTokenizer, WordsAndContractions) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("don't stop"), (Pieces{"don't", " stop"}));
  EXPECT_EQ(split("I'M here, they'll see"), (Pieces{"I'M", " here", ",", " they'll", " see"}));
  EXPECT_EQ(split("HTTPServer"), (Pieces{"HTTPServer"}));
  EXPECT_EQ(split("Café naïve"), (Pieces{"Café", " naïve"}));
}

TEST(PreTokenizer, NumbersInGroupsOfOneToThree) {
  EXPECT_EQ(split("12345 67"), (Pieces{"123", "45", " ", "67"}));
  EXPECT_EQ(split("x1000000"), (Pieces{"x", "100", "000", "0"}));
  EXPECT_EQ(split("3.14"), (Pieces{"3", ".", "14"}));
}

TEST(PreTokenizer, HanRunsAreTheirOwnPieces) {
  EXPECT_EQ(split("我们hello世界"), (Pieces{"我们", "hello", "世界"}));
  EXPECT_EQ(split("你好 世界"), (Pieces{"你好", " ", "世界"}));
  EXPECT_EQ(split("中文，测试！"), (Pieces{"中文", "，", "测试", "！"}));
  // Kana are letters but not Han: they join a word, not the Han run.
  EXPECT_EQ(split("日本のテスト"), (Pieces{"日本", "のテスト"}));
}

TEST(PreTokenizer, WhitespaceRules) {
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n\n", "b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(split("end   "), (Pieces{"end", "   "}));
  EXPECT_EQ(split("\tx"), (Pieces{"\tx"}));
}

TEST(PreTokenizer, Punctuation) {
  EXPECT_EQ(split("Hi!!! ok."), (Pieces{"Hi", "!!!", " ok", "."}));
  EXPECT_EQ(split("x...\n\ny"), (Pieces{"x", "...\n\n", "y"}));
  EXPECT_EQ(split("f(x) = y;"), (Pieces{"f", "(x", ")", " =", " y", ";"}));
  EXPECT_EQ(split("😀 ok"), (Pieces{"😀", " ok"}));
}

TEST(PreTokenizer, PiecesCoverTheText) {
  const std::string text = "Mixed 中文 text, 123456 numbers\r\n\tand émojis 🎉🎉 done.  ";
  std::string joined;
  for (const std::string& p : split(text)) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, InvalidUtf8IsAClearError) {
  testing_util::expect_contains(testing_util::error_of([] { split("ok \xFF\xFE bad"); }), {"not valid UTF-8"});
}

}  // namespace
}  // namespace kplan::tokenizer
