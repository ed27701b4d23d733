// Loading the tokenizer files: malformed tiktoken.model lines refused with file:line, bad
// tokenizer_config.json refused naming the file, missing files named, and the bundle a plan
// carries loads to the same tokenizer.
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/tiktoken_tokenizer.h"
#include "runtime/tokenizer/tokenizer_bundle.h"
#include "tests/unit/test_support.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan::tokenizer {
namespace {

using testing_util::error_of;
using testing_util::expect_contains;

// A valid model: the 256 bytes; `extra` lines are appended.
std::string bytes_model(const std::string& extra = "") {
  std::string text;
  for (int b = 0; b < 256; ++b) text += test::base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  return text + extra;
}

std::string load_error(const std::string& model, const std::string& config = "{}") {
  return error_of([&] { Tokenizer::from_text(model, "m/tiktoken.model", config, "m/tokenizer_config.json"); });
}

TEST(TokenizerFiles, MalformedRankLinesNameFileAndLine) {
  expect_contains(load_error(bytes_model("dGg=\n")), {"m/tiktoken.model:257:", "base64-token rank"});
  expect_contains(load_error(bytes_model("dGg= 256 7\n")), {"m/tiktoken.model:257:"});
  expect_contains(load_error(bytes_model("dGg 256\n")), {"m/tiktoken.model:257:", "not base64"});
  expect_contains(load_error(bytes_model("d!g= 256\n")), {"m/tiktoken.model:257:", "not base64"});
  expect_contains(load_error(bytes_model("dGg= x1\n")), {"m/tiktoken.model:257:", "rank 'x1'"});
  expect_contains(load_error(bytes_model("dGg= 255\n")), {"m/tiktoken.model:257:", "rank 255 appears twice"});
  expect_contains(load_error(bytes_model("YQ== 256\n")), {"m/tiktoken.model:257:", "appears twice"});
  expect_contains(load_error(bytes_model("dGg= 300\n")), {"m/tiktoken.model", "rank 256 is missing"});
  expect_contains(load_error(""), {"m/tiktoken.model", "no ranks"});
}

TEST(TokenizerFiles, BadConfigNamesTheFile) {
  expect_contains(load_error(bytes_model(), "{not json"), {"m/tokenizer_config.json", "not valid JSON"});
  expect_contains(load_error(bytes_model(), R"({"added_tokens_decoder": {"12": {"content": "<x>"}}})"),
                  {"m/tokenizer_config.json", "collides with a rank"});
  expect_contains(load_error(bytes_model(), R"({"added_tokens_decoder": {"abc": {"content": "<x>"}}})"),
                  {"m/tokenizer_config.json", "'abc' is not a token id"});
  expect_contains(load_error(bytes_model(), R"({"added_tokens_decoder": {"300": {}}})"),
                  {"m/tokenizer_config.json", "no string 'content'"});
  expect_contains(load_error(bytes_model(), R"({"eos_token": "[NOPE]"})"), {"eos_token '[NOPE]' is not a special token"});
}

TEST(TokenizerFiles, MissingFilesAreNamed) {
  testing_util::TempDir dir("tok_missing");
  expect_contains(error_of([&] { Tokenizer::from_dir(dir.path()); }), {"tiktoken.model", "does not exist"});
  std::ofstream(dir.path() / "tiktoken.model") << bytes_model();
  expect_contains(error_of([&] { Tokenizer::from_dir(dir.path()); }), {"tokenizer_config.json", "does not exist"});
}

TEST(TokenizerFiles, ByteOnlyModelEncodesBytes) {
  const Tokenizer t = Tokenizer::from_text(bytes_model(), "m", "{}", "c");
  EXPECT_EQ(t.encode("ab"), (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(t.num_specials(), kReservedSpecialTokens);
  EXPECT_FALSE(t.bos_id().has_value());
}

TEST(TokenizerFiles, MissingByteRankIsAClearError) {
  // Rank 0xBF holds "th" instead of the byte 0xBF, the last byte of "ÿ" (C3 BF).
  std::string model;
  for (int b = 0; b < 256; ++b)
    model += test::base64(b == 0xBF ? std::string("th") : std::string(1, static_cast<char>(b))) + " " + std::to_string(b) + "\n";
  const Tokenizer t = Tokenizer::from_text(model, "m", "{}", "c");
  expect_contains(error_of([&] { t.encode("x\xC3\xBF"); }), {"byte 0xBF has no rank"});
}

TEST(TokenizerFiles, BundleCarriesTheSameTokenizer) {
  testing_util::TempDir dir("tok_bundle");
  EXPECT_FALSE(has_tokenizer_files(dir.path()));
  test::write_synthetic_tokenizer(dir.path());
  ASSERT_TRUE(has_tokenizer_files(dir.path()));
  const std::vector<uint8_t> bundle = bundle_tokenizer_files(dir.path());
  ASSERT_TRUE(is_tokenizer_bundle(bundle));
  const Tokenizer from_bundle = tokenizer_from_bundle(bundle, "model.kplan");
  const Tokenizer from_dir = Tokenizer::from_dir(dir.path());
  EXPECT_EQ(from_bundle.summary(), "tiktoken, 768 ranks + 256 specials");
  const std::string text = "[BOS]the thing 中文 12345 😀";
  EXPECT_EQ(from_bundle.encode(text), from_dir.encode(text));

  const std::string hf_json = R"({"version": "1.0", "model": {"type": "BPE"}})";
  EXPECT_FALSE(is_tokenizer_bundle(std::vector<uint8_t>(hf_json.begin(), hf_json.end())));
  expect_contains(error_of([&] { tokenizer_from_bundle(std::vector<uint8_t>(hf_json.begin(), hf_json.end()), "x.kplan"); }),
                  {"x.kplan", "not a kplan tiktoken bundle"});
}

TEST(TokenizerFiles, BundleCarriesTheChatTemplate) {
  testing_util::TempDir dir("tok_bundle_chat");
  test::write_synthetic_tokenizer(dir.path());
  // A bundle from a checkpoint without a template (and every bundle from before the field) has none.
  std::vector<uint8_t> bundle = bundle_tokenizer_files(dir.path());
  EXPECT_EQ(chat_template_from_bundle(bundle, "p.kplan"), std::nullopt);
  // chat_template.jinja beside the files is carried as is, and wins over tokenizer_config.json's.
  std::ofstream(dir.path() / "chat_template.jinja") << "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\n";
  bundle = bundle_tokenizer_files(dir.path());
  std::optional<BundledChatTemplate> t = chat_template_from_bundle(bundle, "p.kplan");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->text, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}\n");
  EXPECT_EQ(t->origin, "chat_template.jinja");
  EXPECT_EQ(t->bos_token, "[BOS]");
  EXPECT_EQ(tokenizer_from_bundle(bundle, "p.kplan").summary(), "tiktoken, 768 ranks + 256 specials");
  // The bundle without that key (an older plan's) still loads its tokenizer.
  nlohmann::json j = nlohmann::json::parse(bundle.begin(), bundle.end());
  j.erase("chat_template.jinja");
  j["tokenizer_config.json"] = R"({"bos_token": "[BOS]", "chat_template": "T"})";
  const std::string text = j.dump();
  t = chat_template_from_bundle(std::vector<uint8_t>(text.begin(), text.end()), "p.kplan");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->text, "T");
  EXPECT_EQ(t->origin, "tokenizer_config.json's chat_template");
}

}  // namespace
}  // namespace kplan::tokenizer
