// `kplan run` end to end through the CLI binary: the ids line, the stats on stderr, DDTree equal
// to AR, and each bad input refused with one clear error line (exit status 1).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/ddtree/synth_checkpoints.h"
#include "tests/unit/kplan_cli.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

using test::CliResult;

// --quiet: no device banner on stderr (tests/unit/cli tests it), so a refusal is its one line.
CliResult run_kplan(const std::string& args) {
  return test::run_kplan("run --quiet " + args, test::synth_checkpoint("tiny").target.parent_path());
}

std::string tiny() { return test::synth_checkpoint("tiny").target.string(); }
std::string tiny_draft() { return test::synth_checkpoint("tiny").draft.string(); }

// One error line mentioning `needle`, exit status 1.
void expect_refused(const std::string& args, const std::string& needle) {
  const CliResult r = run_kplan(args);
  EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

const std::string kPrompt = " --prompt-ids 5,17,42,99,7,300,12 --max-new 12 --ignore-eos";

TEST(CliRun, PrintsIdsAndDDTreeMatchesAR) {
  const CliResult ar = run_kplan(tiny() + " --device cpu --spec none" + kPrompt);
  ASSERT_EQ(ar.status, 0) << ar.err;
  std::istringstream ids(ar.out);
  int n = 0;
  for (int id; ids >> id; ++n) EXPECT_TRUE(id >= 0 && id < 1024);
  EXPECT_EQ(n, 12);
  EXPECT_EQ(std::count(ar.out.begin(), ar.out.end(), '\n'), 1);

  for (const char* drafter : {"oracle", "random"}) {
    const CliResult tree = run_kplan(tiny() + " --draft " + tiny_draft() +
                                     " --spec ddtree --budget 5 --stats --drafter " + drafter + kPrompt);
    ASSERT_EQ(tree.status, 0) << tree.err;
    EXPECT_EQ(tree.out, ar.out) << drafter;
    EXPECT_NE(tree.err.find("stats: mean acceptance len"), std::string::npos) << tree.err;
    EXPECT_NE(tree.err.find("stats: target forwards"), std::string::npos) << tree.err;
  }
  const CliResult chain =
      run_kplan(tiny() + " --spec dflash --drafter oracle --oracle-accuracy 1" + kPrompt);
  ASSERT_EQ(chain.status, 0) << chain.err;
  EXPECT_EQ(chain.out, ar.out);
}

TEST(CliRun, RefusesAPromptLongerThanTheContext) {
  std::string long_prompt = "1";
  for (int i = 0; i < 512; ++i) long_prompt += ",1";  // 513 ids; tiny's context is 512
  expect_refused(tiny() + " --prompt-ids " + long_prompt, "longer than the context");
  expect_refused(tiny() + " --max-context 4 --prompt-ids 1,2,3,4,5", "longer than the context");
}

TEST(CliRun, RefusesBudgetZero) {
  expect_refused(tiny() + " --spec ddtree --drafter random --budget 0" + kPrompt, "--budget");
}

// Issue 12: --draft-depth 1000000 ran until killed; it is bounded by the drafter's block.
TEST(CliRun, RefusesADraftDepthPastTheDraftersBlock) {
  expect_refused(tiny() + " --draft " + tiny_draft() + " --spec ddtree --drafter random --draft-depth 1000000" + kPrompt,
                 "the draft depth 1000000 is past the drafter's block (block_size 8 proposes at most 7 positions)");
}

TEST(CliRun, RefusesAnEmptyPrompt) {
  expect_refused(tiny() + " --prompt-ids ''", "prompt is empty");
  expect_refused(tiny() + " --prompt-ids 1,,2", "empty entry");
  expect_refused(tiny() + " --prompt-ids 1,x", "not a token id");
}

TEST(CliRun, RefusesIdsOutsideTheVocabulary) {
  expect_refused(tiny() + " --prompt-ids 1,1024", "outside the vocabulary");
  expect_refused(tiny() + " --prompt-ids 1,-3", "outside the vocabulary");
}

TEST(CliRun, RefusesDDTreeWithoutADrafter) {
  expect_refused(tiny() + " --spec ddtree" + kPrompt, "needs a drafter");
}

TEST(CliRun, RefusesADrafterThatDoesNotFit) {
  // tiny2's drafter: hidden 192 against tiny's 256.
  expect_refused(tiny() + " --draft " + test::synth_checkpoint("tiny2").draft.string() +
                     " --spec ddtree" + kPrompt,
                 "does not fit");
  // tiny's drafter reading a layer tiny does not have.
  const fs::path bad = test::synth_checkpoint("tiny").target.parent_path() / "draft-bad-layers";
  fs::create_directories(bad);
  fs::copy(tiny_draft(), bad, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(testing_util::read_file(bad / "config.json"));
  config["dflash_config"]["target_layer_ids"] = {1, 7};
  std::ofstream(bad / "config.json") << config.dump(2);
  expect_refused(tiny() + " --draft " + bad.string() + " --spec ddtree" + kPrompt, "target_layer_ids");
}

}  // namespace
}  // namespace kplan
