// EOS as a checkpoint publishes it (issue 11: only config.json's was honoured): generation_config.json's
// eos_token_id (an int or a list) and the tokenizer's end tokens (tokenizer_config.json's eos_token
// and <|im_end|>, the end of a Kimi chat turn) stop `kplan run` too, through a checkpoint directory
// and through a compiled plan (the plan carries the merged list); --ignore-eos ignores them all;
// a bad generation_config.json is refused by file and field.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::fields_of;
using test::lines_of;

class Eos : public ::testing::Test {
 protected:
  void SetUp() override {
    // The tiny target without its drafter (config.json's EOS is id 1).
    const CliResult r = kplan("synth tiny --seed 1 --out " + dir().string());
    ASSERT_EQ(r.status, 0) << r.err;
    free_run_ = ids_of(kplan("run " + dir().string() + kArgs + " --ignore-eos"));
    ASSERT_EQ(free_run_.size(), 12u);
    // The stop token: the 5th generated, unless it appeared earlier (then the first later one that did not).
    for (size_t i = 4; i < free_run_.size(); ++i) {
      bool earlier = false;
      for (size_t j = 0; j < i; ++j) earlier = earlier || free_run_[j] == free_run_[i];
      if (!earlier && free_run_[i] != "1") {
        stop_at_ = i;
        break;
      }
    }
    ASSERT_GT(stop_at_, 0u);
  }
  fs::path dir() const { return scratch_.path() / "target"; }
  CliResult kplan(const std::string& args) { return test::run_kplan(args, scratch_.path()); }
  static std::vector<std::string> ids_of(const CliResult& r) {
    EXPECT_EQ(r.status, 0) << r.err;
    return lines_of(r.out).empty() ? std::vector<std::string>{} : fields_of(lines_of(r.out)[0]);
  }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir() / name) << text; }
  std::vector<std::string> expected_prefix() const {
    return {free_run_.begin(), free_run_.begin() + static_cast<std::ptrdiff_t>(stop_at_ + 1)};
  }
  const std::string kArgs = " --prompt-ids 5,17,42 --max-new 12 --device cpu -q";
  testing_util::TempDir scratch_{"eos"};
  std::vector<std::string> free_run_;
  size_t stop_at_ = 0;
};

TEST_F(Eos, GenerationConfigEosStopsTheDecodeAsAnIntAndAsAList) {
  write("generation_config.json", "{\"eos_token_id\": " + free_run_[stop_at_] + "}");
  EXPECT_EQ(ids_of(kplan("run " + dir().string() + kArgs)), expected_prefix());
  write("generation_config.json", "{\"max_length\": 64, \"eos_token_id\": [1, " + free_run_[stop_at_] + "]}");
  EXPECT_EQ(ids_of(kplan("run " + dir().string() + kArgs)), expected_prefix());
  EXPECT_EQ(ids_of(kplan("run " + dir().string() + kArgs + " --ignore-eos")), free_run_);
  // Through a compiled plan: it carries the merged list.
  const fs::path plan = scratch_.path() / "t.kplan";
  ASSERT_EQ(kplan("compile --model " + dir().string() + " -o " + plan.string()).status, 0);
  EXPECT_EQ(ids_of(kplan("run " + plan.string() + kArgs)), expected_prefix());
}

TEST_F(Eos, TheTokenizersImEndAndEosTokenStopTheDecode) {
  for (const std::string& entry : {std::string("\"<|im_end|>\""), std::string("\"[EOS]\"")}) {
    SCOPED_TRACE(entry);
    const bool im_end = entry == "\"<|im_end|>\"";
    write("tokenizer_config.json", std::string("{") + (im_end ? "" : "\"eos_token\": {\"content\": \"[EOS]\"}, ") +
                                       "\"added_tokens_decoder\": {\"" + free_run_[stop_at_] +
                                       "\": {\"content\": " + entry + ", \"special\": true}}}");
    EXPECT_EQ(ids_of(kplan("run " + dir().string() + kArgs)), expected_prefix());
  }
}

TEST_F(Eos, ABadGenerationConfigIsRefusedByField) {
  write("generation_config.json", "{\"eos_token_id\": [1, 999999]}");
  const CliResult r = kplan("run " + dir().string() + kArgs);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("generation_config.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("eos_token_id"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("999999 outside the vocabulary"), std::string::npos) << r.err;
  write("generation_config.json", "{\"eos_token_id\": \"two\"}");
  EXPECT_NE(kplan("run " + dir().string() + kArgs).err.find("eos_token_id"), std::string::npos);
}

}  // namespace
}  // namespace kplan
