// `kplan run --spec compare` end to end on the synthetic tiny pair: the decoded ids printed once
// (and they are plain AR's, checked against a separate `--spec none` run), the identity line, the
// device and timing lines, and one table row per mode whose figures hold together (every mode
// decodes max_new tokens; AR takes tokens - 1 rounds of one token after the prefill; a speculative
// mode's rounds commit tokens - 1 tokens; target forwards = prefill + rounds). Bad requests are
// one error line.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan {
namespace {

using test::CliResult;
using test::lines_of;

struct ModeRow {
  std::string label;
  int64_t tokens = 0, rounds = 0, target_forwards = 0;
  double acceptance = 0, wall_seconds = 0, tokens_per_second = 0;
  std::string versus_ar;
};

// A table row: the label (may hold spaces), then the seven figure columns.
ModeRow parse_row(const std::string& line) {
  const std::vector<std::string> f = test::fields_of(line);
  EXPECT_GE(f.size(), 8u) << line;
  if (f.size() < 8) return {};
  ModeRow row;
  const size_t n = f.size() - 7;
  for (size_t i = 0; i < n; ++i) row.label += (i ? " " : "") + f[i];
  row.tokens = std::stoll(f[n]);
  row.rounds = std::stoll(f[n + 1]);
  row.acceptance = std::stod(f[n + 2]);
  row.target_forwards = std::stoll(f[n + 3]);
  row.wall_seconds = std::stod(f[n + 4]);
  row.tokens_per_second = std::stod(f[n + 5]);
  row.versus_ar = f[n + 6];
  return row;
}

class RunCompare : public ::testing::Test {
 protected:
  void SetUp() override { pair_ = test::synth_tiny_pair(scratch_.path()); }
  CliResult run(const std::string& args) { return test::run_kplan("run " + args, scratch_.path()); }
  std::string pair_args() const { return pair_.target.string() + " --draft " + pair_.draft.string(); }

  testing_util::TempDir scratch_{"run_compare"};
  test::SynthPair pair_;
};

const std::string kPrompt = " --prompt-ids 5,17,42,99,7,300,12 --max-new 12 --ignore-eos";

// The output's layout and the rows' figures; returns the rows (AR, DFlash chain, DDTree).
std::vector<ModeRow> expect_compare_output(const CliResult& r, const std::string& identity_line, int budget) {
  EXPECT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  EXPECT_EQ(lines.size(), 8u) << r.out;
  if (lines.size() != 8) return {};
  EXPECT_EQ(test::fields_of(lines[0]).size(), 12u) << lines[0];
  EXPECT_EQ(lines[1], identity_line);
  EXPECT_EQ(lines[2].rfind("device: CPU reference backend", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3], "timing: wall clock around each generate call, after an untimed 8-token DDTree budget " +
                          std::to_string(budget) + " warm-up");
  EXPECT_EQ(test::fields_of(lines[4]),
            (std::vector<std::string>{"mode", "tokens", "rounds", "accept", "len", "target", "fwd", "wall", "s",
                                      "tokens/s", "vs", "AR"}));
  std::vector<ModeRow> rows;
  for (size_t i = 5; i < 8; ++i) rows.push_back(parse_row(lines[i]));
  EXPECT_EQ(rows[0].label, "AR");
  EXPECT_EQ(rows[1].label, "DFlash chain");
  EXPECT_EQ(rows[2].label, "DDTree budget " + std::to_string(budget));
  for (const ModeRow& row : rows) {
    EXPECT_EQ(row.tokens, 12) << row.label;
    EXPECT_EQ(row.target_forwards, row.rounds + 1) << row.label << ": one prefill, then a forward per round";
    // The rounds commit every token but the prefill's: accept len = (tokens - 1) / rounds.
    EXPECT_NEAR(row.acceptance * static_cast<double>(row.rounds), 11.0, 0.0005 * row.rounds) << row.label;
    EXPECT_GT(row.wall_seconds, 0) << row.label;
    // tokens/s = tokens / wall s, within the printed rounding (tokens/s to 0.1, wall s to 1 ms): the
    // exact interval, since a linear bound on 12 / wall is too tight for walls of a few ms.
    const double slowest = 12 / (row.wall_seconds + 0.0005), fastest = 12 / (row.wall_seconds - 0.0005);
    EXPECT_GE(row.tokens_per_second, slowest - 0.0501) << row.label << " at wall " << row.wall_seconds;
    EXPECT_LE(row.tokens_per_second, fastest + 0.0501) << row.label << " at wall " << row.wall_seconds;
  }
  EXPECT_EQ(rows[0].rounds, 11) << "AR: one round per token after the prefill's";
  EXPECT_EQ(rows[0].acceptance, 1.0);
  EXPECT_EQ(rows[0].versus_ar, "1.00x");
  for (const ModeRow& row : rows) {
    EXPECT_EQ(row.versus_ar.back(), 'x') << row.versus_ar;
    // vs AR = tokens/s over AR's, within the printed rounding (0.01, and tokens/s to 0.1).
    const double low = (row.tokens_per_second - 0.0501) / (rows[0].tokens_per_second + 0.0501);
    const double high = (row.tokens_per_second + 0.0501) / (rows[0].tokens_per_second - 0.0501);
    EXPECT_GE(std::stod(row.versus_ar), low - 0.0051) << row.label;
    EXPECT_LE(std::stod(row.versus_ar), high + 0.0051) << row.label;
  }
  return rows;
}

TEST_F(RunCompare, GreedyModesAgreeAndTheTableHoldsTogether) {
  const CliResult compare = run(pair_args() + " --spec compare --budget 5 --quiet" + kPrompt);
  const std::vector<ModeRow> rows = expect_compare_output(
      compare, "identical: AR, DFlash chain and DDTree budget 5 emit the same 12 tokens (greedy)", 5);
  // The ids printed are AR's own: a plain run prints the same line.
  const CliResult ar = run(pair_.target.string() + " --spec none" + kPrompt);
  ASSERT_EQ(ar.status, 0) << ar.err;
  EXPECT_EQ(lines_of(compare.out)[0], lines_of(ar.out)[0]);
  EXPECT_TRUE(compare.err.empty()) << compare.err;
}

// An oracle drafter that always proposes the true token: the speculative rows really skip forwards.
TEST_F(RunCompare, AnAcceptingDrafterShowsFewerRounds) {
  const CliResult r = run(pair_args() + " --spec compare --budget 6 --drafter oracle --oracle-accuracy 1" + kPrompt);
  const std::vector<ModeRow> rows =
      expect_compare_output(r, "identical: AR, DFlash chain and DDTree budget 6 emit the same 12 tokens (greedy)", 6);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_GT(rows[i].acceptance, 2.0) << rows[i].label;
    EXPECT_LT(rows[i].target_forwards, rows[0].target_forwards) << rows[i].label;
  }
}

TEST_F(RunCompare, SampledModesAgreeWithOneSeed) {
  const std::string sampling = " --temperature 0.7 --seed 3";
  const CliResult compare = run(pair_args() + " --spec compare --budget 4" + sampling + kPrompt);
  expect_compare_output(compare,
                        "identical: AR, DFlash chain and DDTree budget 4 emit the same 12 tokens "
                        "(temperature 0.7, seed 3: lossless sampling)",
                        4);
  const CliResult ar = run(pair_.target.string() + " --spec none" + sampling + kPrompt);
  ASSERT_EQ(ar.status, 0) << ar.err;
  EXPECT_EQ(lines_of(compare.out)[0], lines_of(ar.out)[0]);
}

TEST_F(RunCompare, TextPromptPrintsTheTextOnce) {
  test::write_synthetic_tokenizer(pair_.target);
  const CliResult r = run(pair_args() + " --spec compare --prompt 'the thing' --max-new 6 --ignore-eos");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 9u) << r.out;
  EXPECT_EQ(lines[1].rfind("text: ", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2], "identical: AR, DFlash chain and DDTree budget 16 emit the same 6 tokens (greedy)");
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 9) << r.out;
}

TEST_F(RunCompare, StatsGoToStderrPerMode) {
  const CliResult r = run(pair_args() + " --spec compare --stats" + kPrompt);
  ASSERT_EQ(r.status, 0) << r.err;
  testing_util::expect_contains(r.err, {"stats: mode                 AR\n", "stats: mode                 DFlash chain\n",
                                        "stats: mode                 DDTree budget 16\n"});
}

void expect_refused(const CliResult& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("kplan: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(RunCompare, RefusesWithoutADrafterOrABudget) {
  expect_refused(run(pair_.target.string() + " --spec compare" + kPrompt), "--spec compare needs a drafter");
  expect_refused(run(pair_args() + " --spec compare --budget 0" + kPrompt), "--budget: '0' is not a tree size");
}

}  // namespace
}  // namespace kplan
