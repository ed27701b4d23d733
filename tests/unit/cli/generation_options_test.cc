// `kplan run`'s generation options through the binary: stop strings (on the bundled pair, which has
// a tokenizer: the ids end at the token that completes the string, the text is cut where it
// begins, --stream prints the same cut text, --stats-json says why it stopped); the sampling
// processors with --compare (DDTree emits AR's sample under them, one seed) and their bad values
// refused by flag; MODEL as a HuggingFace cache snapshot or ORG/NAME in the hub cache
// (HF_HUB_CACHE, HF_HOME), and a clear error, saying nothing is downloaded, when it is missing.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::fields_of;
using test::lines_of;

const std::string kModel = std::string(KPLAN_SOURCE_DIR) + "/models/mini-v3";

class GenerationOptions : public ::testing::Test {
 protected:
  CliResult kplan(const std::string& args) { return test::run_kplan(args, scratch_.path()); }
  testing_util::TempDir scratch_{"generation_options"};
};

// The text after "text: " (to the end of stdout, less the final newline).
std::string text_of(const CliResult& r) {
  const size_t at = r.out.find("\ntext: ");
  EXPECT_NE(at, std::string::npos) << r.out;
  std::string t = r.out.substr(at + 7);
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

TEST_F(GenerationOptions, AStopStringEndsTheDecodeAndCutsTheText) {
  const std::string base = "run " + kModel + " --device cpu -q --ignore-eos --prompt \"def has_key(ch):\"";
  const std::string args = base + " --max-new 24";
  const CliResult full = kplan(args);
  ASSERT_EQ(full.status, 0) << full.err;
  const std::string text = text_of(full);
  const std::vector<std::string> ids = fields_of(lines_of(full.out)[0]);
  ASSERT_EQ(ids.size(), 24u);
  ASSERT_GT(text.size(), 20u);
  // A stop string from the middle of the text (no quotes or newlines: it goes through a shell).
  size_t k = text.size() / 2;
  std::string stop;
  for (; k + 3 < text.size(); ++k) {
    stop = text.substr(k, 3);
    if (stop.find_first_of("\"'\\\n$`") == std::string::npos && stop.find_first_not_of(' ') != std::string::npos) break;
  }
  const size_t cut = text.find(stop);
  ASSERT_LT(cut, text.size());
  const CliResult stopped = kplan(args + " --stop \"" + stop + "\" --stats-json " + (scratch_.path() / "s.json").string());
  ASSERT_EQ(stopped.status, 0) << stopped.err;
  EXPECT_EQ(text_of(stopped), text.substr(0, cut)) << "stop '" << stop << "'";
  const std::vector<std::string> kept = fields_of(lines_of(stopped.out)[0]);
  ASSERT_LT(kept.size(), ids.size());
  EXPECT_EQ(kept, std::vector<std::string>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kept.size())));
  std::ifstream in(scratch_.path() / "s.json");
  EXPECT_EQ(nlohmann::json::parse(in)["stop_reason"], "stop string");
  // One token fewer would not have completed it: the decode stopped at the first token it could.
  const CliResult shorter = kplan(base + " --max-new " + std::to_string(kept.size() - 1));
  ASSERT_EQ(shorter.status, 0) << shorter.err;
  EXPECT_EQ(text_of(shorter).find(stop), std::string::npos);
  // --stream prints the same text, cut alike; with DDTree too.
  const CliResult streamed = kplan(args + " --stop \"" + stop + "\" --stream");
  ASSERT_EQ(streamed.status, 0) << streamed.err;
  EXPECT_EQ(streamed.out, text.substr(0, cut) + "\n");
  const CliResult tree = kplan(args + " --stop \"" + stop + "\" --drafter random --spec ddtree");
  EXPECT_EQ(tree.out, stopped.out);
}

TEST_F(GenerationOptions, ProcessorsStayLosslessUnderDDTree) {
  const test::SynthPair pair = test::synth_tiny_pair(scratch_.path());
  const std::string base = "run " + pair.target.string() + " --draft " + pair.draft.string() +
                           " --prompt-ids 5,17,42 --max-new 24 --ignore-eos --device cpu -q --compare --seed 9";
  for (const std::string& p : {" --temperature 0.8 --top-k 20 --top-p 0.9 --min-p 0.01",
                               " --temperature 0.7 --repetition-penalty 1.3 --frequency-penalty 0.4 --presence-penalty 0.2",
                               " --repetition-penalty 2"}) {
    const CliResult r = kplan(base + p);
    EXPECT_EQ(r.status, 0) << p << ": " << r.err;
    EXPECT_NE(r.err.find("emits AR's 24 tokens"), std::string::npos) << p << ": " << r.err;
  }
}

TEST_F(GenerationOptions, BadProcessorValuesAreRefusedByFlag) {
  const test::SynthPair pair = test::synth_tiny_pair(scratch_.path());
  for (const std::string& bad : {"--top-k -1", "--top-p 0", "--top-p 1.5", "--min-p 2", "--repetition-penalty 0",
                                 "--frequency-penalty inf", "--stop x"}) {
    const CliResult r = kplan("run " + pair.target.string() + " --prompt-ids 5 " + bad);
    EXPECT_NE(r.status, 0) << bad;
    const std::string flag = bad == "--stop x" ? "no tokenizer" : bad.substr(0, bad.find(' '));
    EXPECT_NE(r.err.find("kplan: error: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << bad << ": " << r.err;
  }
}

// A HuggingFace hub cache under `root`: models--acme--tiny with one snapshot, named by refs/main.
struct HubCache {
  fs::path root, repo, snapshot;
};

class HfCache : public GenerationOptions {
 protected:
  void SetUp() override {
    hub_.root = scratch_.path() / "hf-home" / "hub";
    hub_.repo = hub_.root / "models--acme--tiny";
    hub_.snapshot = hub_.repo / "snapshots" / "0123abcd";
    const CliResult r = kplan("synth tiny --seed 1 --out " + hub_.snapshot.string());
    ASSERT_EQ(r.status, 0) << r.err;
    fs::create_directories(hub_.repo / "refs");
    std::ofstream(hub_.repo / "refs" / "main") << "0123abcd";
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
  }
  void TearDown() override {
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HOME");
  }
  std::string ids(const std::string& model) {
    const CliResult r = kplan("run " + model + " --prompt-ids 5,17,42 --max-new 6 --device cpu -q");
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
  }
  HubCache hub_;
};

TEST_F(HfCache, OrgNameResolvesInTheHubCacheAndASnapshotIsAModel) {
  const std::string direct = ids(hub_.snapshot.string());
  ASSERT_FALSE(direct.empty());
  setenv("HF_HUB_CACHE", hub_.root.c_str(), 1);
  EXPECT_EQ(ids("acme/tiny"), direct);
  EXPECT_EQ(ids(hub_.repo.string()), direct) << "the repo folder: its refs/main snapshot";
  unsetenv("HF_HUB_CACHE");
  setenv("HF_HOME", hub_.root.parent_path().c_str(), 1);  // HF_HOME/hub
  EXPECT_EQ(ids("acme/tiny"), direct);
  const fs::path plan = scratch_.path() / "t.kplan";
  const CliResult c = kplan("compile --model acme/tiny -o " + plan.string());
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_TRUE(fs::exists(plan));
}

TEST_F(HfCache, AMissingNameSaysNothingIsDownloaded) {
  setenv("HF_HUB_CACHE", hub_.root.c_str(), 1);
  const CliResult r = kplan("run acme/huge --prompt-ids 5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("MODEL 'acme/huge' is not a path, and the HuggingFace cache " + hub_.root.string() +
                       " has no models--acme--huge (kplan downloads nothing"),
            std::string::npos)
      << r.err;
  // A repo folder whose refs/main names a snapshot it lacks.
  std::ofstream(hub_.repo / "refs" / "main") << "feedbeef";
  const CliResult stale = kplan("run acme/tiny --prompt-ids 5");
  EXPECT_NE(stale.err.find("refs/main names snapshot feedbeef"), std::string::npos) << stale.err;
}

}  // namespace
}  // namespace kplan
