// `kplan run --stats`, `--compare` and `--draft` without `--spec`, end to end on the synthetic tiny
// pair: the acceptance histogram's counts sum to the rounds and its tokens to the committed ones
// (every token but the prefill's), the per-round stage times are the totals over the rounds,
// tokens/s is the tokens over the wall time; --compare prints the mode's tokens (AR's) and its
// verdict, greedy and sampled with one seed, and refuses what it cannot check; --draft DIR alone
// decodes with DDTree.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/kplan_cli.h"

namespace kplan {
namespace {

using test::CliResult;
using test::fields_of;
using test::lines_of;

const std::string kPrompt = " --prompt-ids 5,17,42,99,7,300,12 --max-new 12 --ignore-eos";

// One decode's --stats block on stderr.
struct Stats {
  std::map<std::string, std::vector<std::string>> figures;  // "rounds" -> {"5"}; "time draft" -> {"1.2", "ms", ...}
  std::vector<std::pair<int, int64_t>> histogram;            // (tokens a round committed, rounds)
};

// The --stats blocks in `err`, in order (each begins at its "stats: prompt tokens" line).
std::vector<Stats> parse_stats(const std::string& err) {
  std::vector<Stats> blocks;
  for (const std::string& line : lines_of(err)) {
    if (line.rfind("stats: ", 0) != 0) continue;
    if (line.rfind("stats:   ", 0) == 0) {  // a histogram line: length, rounds, bar
      const std::vector<std::string> f = fields_of(line);
      EXPECT_GE(f.size(), 3u) << line;
      if (!blocks.empty() && f.size() >= 3) blocks.back().histogram.emplace_back(std::stoi(f[1]), std::stoll(f[2]));
      continue;
    }
    const std::string label_and_value = line.substr(7);
    std::string label = line.rfind("stats: time ", 0) == 0 ? label_and_value.substr(0, 20) : label_and_value.substr(0, 21);
    label.erase(label.find_last_not_of(' ') + 1);
    if (label == "prompt tokens") blocks.emplace_back();
    if (blocks.empty()) continue;
    blocks.back().figures[label] = fields_of(line.substr(7 + label.size()));
  }
  return blocks;
}

double figure(const Stats& s, const std::string& label, size_t i = 0) {
  const auto it = s.figures.find(label);
  EXPECT_NE(it, s.figures.end()) << label;
  if (it == s.figures.end() || it->second.size() <= i) return NAN;
  return std::stod(it->second[i]);
}

// What every --stats block of a 12-token decode of kPrompt must hold together.
void expect_consistent(const Stats& s, const std::string& what) {
  SCOPED_TRACE(what);
  const auto rounds = static_cast<int64_t>(figure(s, "rounds"));
  EXPECT_EQ(figure(s, "generated tokens"), 12);
  EXPECT_GT(rounds, 0);
  int64_t counted = 0, committed = 0;
  int expected_length = 1;
  for (const auto& [length, n] : s.histogram) {
    EXPECT_EQ(length, expected_length++) << "lengths 1, 2, 3 ... in order";
    counted += n;
    committed += length * n;
  }
  ASSERT_FALSE(s.histogram.empty());
  EXPECT_GT(s.histogram.back().second, 0) << "the histogram ends at the longest length seen";
  EXPECT_EQ(counted, rounds) << "the histogram counts every round once";
  EXPECT_EQ(committed, 11) << "the rounds commit every token but the prefill's";
  EXPECT_NEAR(figure(s, "mean acceptance len"), 11.0 / static_cast<double>(rounds), 0.0005);
  EXPECT_EQ(figure(s, "mean acceptance len", 5), 11) << "committed";
  EXPECT_EQ(figure(s, "mean acceptance len", 8), rounds);
  // tokens/s = generated / wall (the wall time printed to 1 µs, the rate to 0.1).
  const double wall_ms = figure(s, "wall time");
  EXPECT_GT(wall_ms, 0);
  EXPECT_NEAR(figure(s, "tokens/s"), 12 / (wall_ms / 1e3), 0.051 + 12e3 / (wall_ms * wall_ms) * 0.0005);
  // Each round stage: total ms, then µs per round = total / rounds (to the printed rounding).
  double stages_ms = figure(s, "time prefill");
  for (const char* stage : {"time draft", "time tree build", "time verify", "time walk+commit", "time host/other"}) {
    const double total_ms = figure(s, stage, 0);
    EXPECT_GE(total_ms, 0) << stage;
    EXPECT_EQ(s.figures.at(stage).at(3), "us/round") << stage;
    EXPECT_NEAR(figure(s, stage, 2), total_ms * 1e3 / static_cast<double>(rounds), 0.051 + 0.5 / rounds) << stage;
    stages_ms += total_ms;
  }
  EXPECT_GT(figure(s, "time verify"), 0);
  // host/other is the wall time the stages leave: together they are the wall time.
  EXPECT_NEAR(stages_ms, wall_ms, 0.004);
}

class RunStats : public ::testing::Test {
 protected:
  void SetUp() override { pair_ = test::synth_tiny_pair(scratch_.path()); }
  CliResult run(const std::string& args) { return test::run_kplan("run " + args, scratch_.path()); }
  std::string pair_args() const { return pair_.target.string() + " --draft " + pair_.draft.string(); }
  std::string ar_out() {
    const CliResult ar = run(pair_.target.string() + kPrompt);
    EXPECT_EQ(ar.status, 0) << ar.err;
    return ar.out;
  }

  testing_util::TempDir scratch_{"run_stats"};
  test::SynthPair pair_;
};

TEST_F(RunStats, TheHistogramAndStageTimesAddUp) {
  const CliResult tree =
      run(pair_args() + " --spec ddtree --budget 4 --drafter oracle --oracle-accuracy 0.7 --seed 2 --stats" + kPrompt);
  ASSERT_EQ(tree.status, 0) << tree.err;
  const std::vector<Stats> blocks = parse_stats(tree.err);
  ASSERT_EQ(blocks.size(), 1u) << tree.err;
  expect_consistent(blocks[0], "DDTree, oracle 0.7");
  EXPECT_GT(blocks[0].histogram.size(), 1u) << "an accepting oracle commits more than one token in some rounds\n"
                                            << tree.err;
  EXPECT_GT(figure(blocks[0], "time draft"), 0);

  const CliResult ar = run(pair_.target.string() + " --stats" + kPrompt);
  ASSERT_EQ(ar.status, 0) << ar.err;
  const std::vector<Stats> ar_blocks = parse_stats(ar.err);
  ASSERT_EQ(ar_blocks.size(), 1u) << ar.err;
  expect_consistent(ar_blocks[0], "AR");
  EXPECT_EQ(ar_blocks[0].histogram, (std::vector<std::pair<int, int64_t>>{{1, 11}})) << "AR: one token a round";
}

TEST_F(RunStats, DraftWithoutSpecDecodesWithDDTree) {
  const CliResult r = run(pair_args() + " --stats" + kPrompt);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("stats: mode                 ddtree budget 16, drafter dflash, device cpu"), std::string::npos)
      << r.err;
  const std::vector<Stats> blocks = parse_stats(r.err);
  ASSERT_EQ(blocks.size(), 1u);
  expect_consistent(blocks[0], "--draft alone");
  // A chain verifies at most the drafter's block (8 tokens) a round; a tree of up to 16 nodes + the
  // root more (fewer near the end, where the tokens still wanted bound its depth).
  EXPECT_GT(figure(blocks[0], "mean verify tokens"), 8) << r.err;
  EXPECT_EQ(r.out, ar_out());
}

TEST_F(RunStats, ComparePassesGreedyAndSampledWithOneSeed) {
  const CliResult tree = run(pair_args() + " --compare --quiet" + kPrompt);
  ASSERT_EQ(tree.status, 0) << tree.err;
  EXPECT_EQ(tree.out, ar_out()) << "the mode's tokens, printed as a plain run prints them";
  EXPECT_EQ(tree.err, "compare: DDTree budget 16 emits AR's 12 tokens (greedy)\n");

  const std::string sampling = " --temperature 0.7 --seed 3";
  const CliResult chain = run(pair_args() + " --compare --spec dflash --stats" + sampling + kPrompt);
  ASSERT_EQ(chain.status, 0) << chain.err;
  const CliResult sampled_ar = run(pair_.target.string() + sampling + kPrompt);
  ASSERT_EQ(sampled_ar.status, 0) << sampled_ar.err;
  EXPECT_EQ(chain.out, sampled_ar.out);
  const std::vector<std::string> err = lines_of(chain.err);
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.back(), "compare: DFlash chain emits AR's 12 tokens (temperature 0.7, seed 3: lossless sampling)");
  testing_util::expect_contains(chain.err, {"stats: mode                 AR\n", "stats: mode                 DFlash chain\n"});
  const std::vector<Stats> blocks = parse_stats(chain.err);
  ASSERT_EQ(blocks.size(), 2u) << chain.err;
  expect_consistent(blocks[0], "AR");
  expect_consistent(blocks[1], "DFlash chain");
}

void expect_refused(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("kplan: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(RunStats, CompareRefusesWhatItCannotCheck) {
  expect_refused(run(pair_args() + " --compare --spec none" + kPrompt),
                 "--compare checks one speculative mode against AR: give --spec dflash or --spec ddtree");
  expect_refused(run(pair_args() + " --compare --spec compare" + kPrompt), "already checks all three modes");
  expect_refused(run(pair_.target.string() + " --compare" + kPrompt), "--compare (--spec ddtree) needs a drafter");
}

}  // namespace
}  // namespace kplan
