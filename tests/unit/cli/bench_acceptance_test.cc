// `kplan bench --acceptance PROMPTS MODEL` end to end on the synthetic tiny pair (CPU): a 2-prompt
// file gives a JSON row for every (temperature, mode, budget), in the table's order, whose figures
// hold together (sums equal the per-prompt values, acceptance = committed / rounds within what
// the drafter can propose, AR one token per round, every decode equal to AR's); a drafter that
// is told the continuation shows acceptance above 1; bad PROMPTS files are refused by name and
// line, bad options by name.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using nlohmann::json;

class BenchAcceptance : public ::testing::Test {
 protected:
  void SetUp() override { pair_ = test::synth_tiny_pair(scratch_.path()); }

  fs::path write_prompts(const std::string& name, const std::string& content) {
    const fs::path p = scratch_.path() / name;
    std::ofstream(p) << content;
    return p;
  }
  CliResult bench(const fs::path& prompts, const std::string& args) {
    return test::run_kplan("bench --acceptance " + prompts.string() + " " + pair_.target.string() + " --draft " +
                               pair_.draft.string() + " " + args,
                           scratch_.path());
  }
  void expect_refused(const CliResult& r, const std::string& needle) {
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_EQ(r.err.rfind("kplan: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << "'" << needle << "' not in: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }

  testing_util::TempDir scratch_{"bench_acceptance"};
  test::SynthPair pair_;
};

// Two prompts on lines 1 and 3 (a blank line between; extra keys are ignored).
const std::string kTwoPrompts = "{\"ids\": [5, 17, 42, 99, 7, 300, 12], \"source\": \"a.py\"}\n\n{\"ids\": [1, 2, 3]}\n";
constexpr int64_t kMaxNew = 6;

// The figures of one JSON row hold together; `max_depth`: the most nodes a round's path can hold.
void expect_sane_row(const json& row, int64_t max_depth) {
  const std::string what = row.dump().substr(0, 120);
  const json& per_prompt = row["per_prompt"];
  ASSERT_EQ(per_prompt.size(), 2u) << what;
  EXPECT_EQ(per_prompt[0]["line"], 1);
  EXPECT_EQ(per_prompt[1]["line"], 3);
  int64_t tokens = 0, rounds = 0, committed = 0, forwards = 0;
  double wall = 0, acceptance_sum = 0;
  for (const json& p : per_prompt) {
    EXPECT_EQ(p["tokens"], kMaxNew) << what;
    EXPECT_EQ(p["matches_ar"], true) << what;
    EXPECT_EQ(p["target_forwards"], p["rounds"].get<int64_t>() + 1) << what << ": one prefill, then a round each";
    EXPECT_EQ(p["committed_in_rounds"], kMaxNew - 1) << what << ": the rounds make every token but the prefill's";
    tokens += p["tokens"].get<int64_t>();
    rounds += p["rounds"].get<int64_t>();
    committed += p["committed_in_rounds"].get<int64_t>();
    forwards += p["target_forwards"].get<int64_t>();
    wall += p["wall_seconds"].get<double>();
    acceptance_sum += p["mean_acceptance_length"].get<double>();
  }
  EXPECT_EQ(row["tokens"], tokens);
  EXPECT_EQ(row["rounds"], rounds);
  EXPECT_EQ(row["committed_in_rounds"], committed);
  EXPECT_EQ(row["target_forwards"], forwards);
  EXPECT_NEAR(row["wall_seconds"].get<double>(), wall, 1e-9);
  EXPECT_GT(wall, 0);
  const double acceptance = row["mean_acceptance_length"].get<double>();
  EXPECT_DOUBLE_EQ(acceptance, static_cast<double>(committed) / static_cast<double>(rounds));
  EXPECT_GE(acceptance, 1.0) << what;
  EXPECT_LE(acceptance, static_cast<double>(max_depth + 1)) << what;
  EXPECT_DOUBLE_EQ(row["mean_acceptance_length_per_prompt"].get<double>(), acceptance_sum / 2);
  EXPECT_DOUBLE_EQ(row["tokens_per_second"].get<double>(), static_cast<double>(tokens) / wall);
  EXPECT_DOUBLE_EQ(row["tokens_per_target_forward"].get<double>(),
                   static_cast<double>(tokens) / static_cast<double>(forwards));
  EXPECT_GT(row["speedup_vs_ar"].get<double>(), 0) << what;
  EXPECT_EQ(row["matches_ar"], true) << what;
}

TEST_F(BenchAcceptance, EveryModeBudgetAndTemperatureHasASaneRow) {
  const fs::path prompts = write_prompts("two.jsonl", kTwoPrompts), out = scratch_.path() / "acceptance.json";
  const CliResult r = bench(prompts, "--budgets 2,4 --temperatures 0,0.7 --max-new 6 --ignore-eos --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(testing_util::read_file(out));
  EXPECT_EQ(j["format"], "kplan-acceptance-1");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["draft_block_size"], 8);
  EXPECT_EQ(j["max_new"], kMaxNew);
  EXPECT_EQ(j["prompts"], json::parse(R"([{"line": 1, "prompt_tokens": 7}, {"line": 3, "prompt_tokens": 3}])"));
  EXPECT_EQ(j["budgets"], json::parse("[2, 4]"));
  EXPECT_EQ(j["temperatures"], json::parse("[0.0, 0.7]"));

  const json& rows = j["rows"];
  ASSERT_EQ(rows.size(), 8u);  // per temperature: AR, DFlash chain, DDTree 2, DDTree 4
  size_t i = 0;
  for (double temperature : {0.0, 0.7}) {
    const json& ar = rows[i];
    for (const auto& [mode, budget] : std::vector<std::pair<std::string, json>>{
             {"ar", nullptr}, {"dflash", nullptr}, {"ddtree", 2}, {"ddtree", 4}}) {
      const json& row = rows[i++];
      EXPECT_EQ(row["temperature"], temperature);
      EXPECT_EQ(row["mode"], mode);
      EXPECT_EQ(row["budget"], budget);
      // A chain proposes at most block - 1 = 7 nodes; a tree's deepest path holds at most its budget.
      expect_sane_row(row, mode == "ddtree" ? budget.get<int64_t>() : 7);
      EXPECT_DOUBLE_EQ(row["speedup_vs_ar"].get<double>(),
                       row["tokens_per_second"].get<double>() / ar["tokens_per_second"].get<double>());
    }
    EXPECT_EQ(ar["label"], "AR");
    EXPECT_EQ(ar["rounds"], 2 * (kMaxNew - 1)) << "AR: one round per token after the prefill's";
    EXPECT_EQ(ar["mean_acceptance_length"], 1.0);
    EXPECT_EQ(ar["speedup_vs_ar"], 1.0);
  }

  // The table: the three header lines, the column header, a row per JSON row, the identity line.
  const std::vector<std::string> lines = test::lines_of(r.out);
  ASSERT_EQ(lines.size(), 13u) << r.out;
  EXPECT_EQ(lines[0], "acceptance: 2 prompts from " + prompts.string() +
                          ", max-new 6, drafter dflash (block 8), seed 0, EOS ignored");
  EXPECT_EQ(lines[1].rfind("device: CPU reference backend", 0), 0u) << lines[1];
  EXPECT_EQ(lines[3].rfind("temperature  mode", 0), 0u) << lines[3];
  EXPECT_EQ(test::fields_of(lines[4])[1], "AR");
  EXPECT_EQ(test::fields_of(lines[11])[0], "0.7");
  EXPECT_EQ(lines[11].find("DDTree budget 4"), 13u) << lines[11];
  EXPECT_EQ(lines[12], "identical: every mode emitted AR's tokens for every prompt and temperature");
}

// tools/plot_acceptance.py (a doc tool: --no-plot needs no matplotlib) tabulates every row.
TEST_F(BenchAcceptance, ThePlotToolTabulatesTheJson) {
  const fs::path prompts = write_prompts("two.jsonl", kTwoPrompts), out = scratch_.path() / "plot.json";
  ASSERT_EQ(bench(prompts, "--budgets 2 --temperatures 0,0.7 --max-new 3 --json " + out.string()).status, 0);
  const fs::path table = scratch_.path() / "table.md";
  const std::string cmd = "python3 " KPLAN_SOURCE_DIR "/tools/plot_acceptance.py --no-plot " + out.string() + " >" +
                          table.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::vector<std::string> lines = test::lines_of(testing_util::read_file(table));
  ASSERT_GE(lines.size(), 8u);
  EXPECT_EQ(lines[0].rfind("| temperature | mode | budget | mean acceptance length |", 0), 0u) << lines[0];
  EXPECT_EQ(lines[2].rfind("| 0 | AR |  | 1.000 | 1.000 |", 0), 0u) << lines[2];
  EXPECT_EQ(lines[4].rfind("| 0 | DDTree budget 2 | 2 |", 0), 0u) << lines[4];
  EXPECT_EQ(lines[7].rfind("| 0.7 | DDTree budget 2 | 2 |", 0), 0u) << lines[7];
}

// A drafter told the true continuation (80% right per depth): the speculative rows accept more
// than one token per round, so the sums are not just AR's.
TEST_F(BenchAcceptance, AnOracleDrafterAcceptsMoreThanOne) {
  const fs::path prompts = write_prompts("two.jsonl", kTwoPrompts), out = scratch_.path() / "oracle.json";
  const CliResult r =
      bench(prompts, "--drafter oracle --budgets 8 --temperatures 0 --max-new 12 --ignore-eos --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const json rows = json::parse(testing_util::read_file(out))["rows"];
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_GT(rows[i]["mean_acceptance_length"].get<double>(), 1.5) << rows[i]["label"];
    EXPECT_LT(rows[i]["target_forwards"].get<int64_t>(), rows[0]["target_forwards"].get<int64_t>());
    EXPECT_EQ(rows[i]["matches_ar"], true);
  }
}

TEST_F(BenchAcceptance, TextPromptsGoThroughTheTokenizer) {
  test::write_synthetic_tokenizer(pair_.target);
  const fs::path prompts = write_prompts("text.jsonl", "{\"text\": \"the thing\"}\n{\"ids\": [1, 2]}\n");
  const fs::path out = scratch_.path() / "text.json";
  const CliResult r = bench(prompts, "--budgets 4 --temperatures 0 --max-new 3 --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  // "the thing" is [258, 32, 256, 262] (tokenizer_test.cc).
  EXPECT_EQ(json::parse(testing_util::read_file(out))["prompts"],
            json::parse(R"([{"line": 1, "prompt_tokens": 4}, {"line": 2, "prompt_tokens": 2}])"));
}

TEST_F(BenchAcceptance, RefusesBadPromptFilesByNameAndLine) {
  const std::string good = "{\"ids\": [1, 2]}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {good + "not json\n", "line 2: not JSON ("},
      {good + "[1, 2]\n", "line 2: expected an object {\"text\": \"...\"} or {\"ids\": [1, 2, 3]}, got a JSON array"},
      {"{\"text\": \"x\", \"ids\": [1]}\n", "line 1: give \"text\" or \"ids\", not both"},
      {"{\"txt\": \"x\"}\n", "line 1: no \"text\" or \"ids\" key"},
      {"{\"text\": 5}\n", "line 1: \"text\" must be a string, got a JSON number"},
      {"{\"text\": \"\"}\n", "line 1: \"text\" is empty"},
      {"{\"ids\": []}\n", "line 1: \"ids\" is empty"},
      {"{\"ids\": 3}\n", "line 1: \"ids\" must be an array of token ids"},
      {"{\"ids\": [1, 2.5]}\n", "line 1: \"ids\" entry 2 is not an integer token id"},
      {good + "\n{\"ids\": [1, 1024]}\n", "line 3: id 1024 is outside the vocabulary (1024 ids)"},
      {"{\"ids\": [-1]}\n", "line 1: id -1 is outside the vocabulary"},
      {"{\"text\": \"hello\"}\n", "line 1: no tokenizer: MODEL '"},
      {"\n  \n", "holds no prompts"},
  };
  for (const auto& [content, needle] : cases) {
    SCOPED_TRACE(content);
    const fs::path prompts = write_prompts("bad.jsonl", content);
    expect_refused(bench(prompts, "--max-new 2"), "PROMPTS '" + prompts.string() + "'");
    expect_refused(bench(prompts, "--max-new 2"), needle);
  }
  const fs::path missing = scratch_.path() / "missing.jsonl";
  expect_refused(bench(missing, ""), missing.string() + ": cannot open PROMPTS file: does not exist");
  expect_refused(bench(scratch_.path(), ""), ": cannot open PROMPTS file: is a directory");
}

TEST_F(BenchAcceptance, RefusesBadOptionsByName) {
  const fs::path prompts = write_prompts("two.jsonl", kTwoPrompts);
  expect_refused(bench(prompts, "--budgets 0"), "--budgets: '0' is not a tree size");
  expect_refused(bench(prompts, "--budgets 4,,8"), "--budgets: empty entry in '4,,8'");
  expect_refused(bench(prompts, "--temperatures -1"), "--temperatures: -1 is negative");
  expect_refused(bench(prompts, "--temperatures 0,x"), "--temperatures: 'x' is not a temperature");
  expect_refused(bench(prompts, "--max-new 0"), "--max-new must be within [1, 2^31 - 1]");
  expect_refused(bench(prompts, "--json " + (scratch_.path() / "no-dir" / "a.json").string()), "--json: cannot write");
  const CliResult no_drafter = test::run_kplan(
      "bench --acceptance " + prompts.string() + " " + pair_.target.string(), scratch_.path());
  expect_refused(no_drafter, "bench --acceptance needs a drafter");
}

}  // namespace
}  // namespace kplan
