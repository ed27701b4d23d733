// The bundled trained pair (models/mini-v3 + models/mini-v3-dflash, and models/mini-v3-int4) as
// the README's main command uses it, on the CPU reference backend: both targets compile with the
// drafter into plans; on 5 fixed held-out prompts greedy AR, chain DFlash and DDTree emit the same
// tokens; and the drafter's acceptance stays above a regression bound set from the measurement in
// docs/acceptance.md (a random-weight drafter accepts 1.0, nothing); `run --compare --stats` passes
// and its histogram adds up.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(KPLAN_SOURCE_DIR) + "/models";
const std::string kPrompts = std::string(KPLAN_TEST_DATA_DIR) + "/mini-v3/heldout_prompts.jsonl";

// Measured on these 5 prompts, 32 new tokens, CPU (tools/train, docs/acceptance.md): chain
// DFlash 1.87 and DDTree budget 16 2.31 committed tokens per round. The bounds sit between that
// and a drafter that predicts nothing (1.0).
constexpr double kChainBound = 1.6;
constexpr double kDDTreeBound = 1.9;

class BundledPair : public ::testing::Test {
 protected:
  fs::path first_prompts(int n) {
    std::ifstream in(kPrompts);
    const fs::path out = scratch_.path() / "prompts.jsonl";
    std::ofstream o(out);
    std::string line;
    for (int i = 0; i < n && std::getline(in, line); ++i) o << line << "\n";
    return out;
  }
  testing_util::TempDir scratch_{"bundled_pair"};
};

TEST_F(BundledPair, BothTargetsCompileWithTheDrafter) {
  for (const std::string target : {"mini-v3", "mini-v3-int4"}) {
    const fs::path plan = scratch_.path() / (target + ".kplan");
    const test::CliResult r = test::run_kplan("compile --model " + kModels + "/" + target + " --draft " + kModels +
                                                  "/mini-v3-dflash --arch sm_90 -o " + plan.string(),
                                              scratch_.path());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(fs::file_size(plan), 4u << 20) << "the plan holds the weights";
  }
}

TEST_F(BundledPair, GreedyModesAgreeAndTheDrafterAccepts) {
  const fs::path json = scratch_.path() / "acceptance.json";
  const test::CliResult r =
      test::run_kplan("bench --acceptance " + first_prompts(5).string() + " " + kModels + "/mini-v3 --draft " +
                          kModels + "/mini-v3-dflash --budgets 16 --temperatures 0 --max-new 32 --device cpu --json " +
                          json.string(),
                      scratch_.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(testing_util::read_file(json));
  ASSERT_EQ(j.at("prompts").size(), 5u);
  double chain = 0, ddtree = 0;
  for (const auto& row : j.at("rows")) {
    EXPECT_TRUE(row.at("matches_ar").get<bool>()) << row.at("label");
    for (const auto& p : row.at("per_prompt")) EXPECT_TRUE(p.at("matches_ar").get<bool>());
    if (row.at("mode") == "dflash") chain = row.at("mean_acceptance_length").get<double>();
    if (row.at("mode") == "ddtree") ddtree = row.at("mean_acceptance_length").get<double>();
  }
  EXPECT_GT(chain, kChainBound);
  EXPECT_GT(ddtree, kDDTreeBound);
  EXPECT_GT(ddtree, chain) << "the tree accepts more than the single path at the same block size";
}

TEST_F(BundledPair, TheInt4TargetDecodesTheSameTextWithEveryMode) {
  const std::string prompt = "def read_config(path):\n    with open(path) as f:\n";
  std::string text;
  for (const std::string spec : {"none", "ddtree"}) {
    const test::CliResult r = test::run_kplan("run " + kModels + "/mini-v3-int4 --draft " + kModels +
                                                  "/mini-v3-dflash --device cpu --max-new 24 --spec " + spec +
                                                  " --prompt '" + prompt + "'",
                                              scratch_.path());
    ASSERT_EQ(r.status, 0) << r.err;
    const size_t at = r.out.find("text: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    if (text.empty()) text = r.out.substr(at);
    EXPECT_EQ(r.out.substr(at), text) << spec;
  }
  // Real text, not junk ids: printable ASCII and newlines only, with some letters.
  size_t letters = 0;
  for (unsigned char c : text) {
    EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << "byte " << int(c) << " in " << text;
    letters += std::isalpha(c) != 0;
  }
  EXPECT_GT(letters, 10u) << text;
}

// `kplan run --compare` on the pair as a user runs it: --draft alone means DDTree, checked against
// AR token for token (exit 0, the verdict on stderr); --stats' histogram covers every round and
// every committed token, with rounds that accepted drafted tokens (the trained drafter predicts).
TEST_F(BundledPair, CompareAgreesWithARAndTheHistogramAddsUp) {
  const std::string prompt = "def read_config(path):\n    with open(path) as f:\n";
  const test::CliResult r = test::run_kplan("run " + kModels + "/mini-v3 --draft " + kModels +
                                                "/mini-v3-dflash --device cpu --max-new 16 --ignore-eos --compare "
                                                "--stats --prompt '" + prompt + "'",
                                            scratch_.path());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> err = test::lines_of(r.err);
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), "compare: DDTree budget 16 emits AR's 16 tokens (greedy)");
  // The DDTree block (the second): its histogram lines follow its header.
  const size_t tree = r.err.find("stats: mode                 DDTree budget 16\n");
  ASSERT_NE(tree, std::string::npos) << r.err;
  int64_t rounds = -1, counted = 0, committed = 0, longest = 0;
  for (const std::string& line : test::lines_of(r.err.substr(tree))) {
    const std::vector<std::string> f = test::fields_of(line);
    if (line.rfind("stats: rounds ", 0) == 0) rounds = std::stoll(f.at(2));
    if (line.rfind("stats:   ", 0) == 0) {
      const int64_t length = std::stoll(f.at(1)), n = std::stoll(f.at(2));
      counted += n;
      committed += length * n;
      if (n > 0) longest = length;
    }
  }
  EXPECT_EQ(counted, rounds) << r.err;
  EXPECT_EQ(committed, 15) << "every token but the prefill's\n" << r.err;
  EXPECT_GT(longest, 1) << r.err;
}

}  // namespace
}  // namespace kplan
