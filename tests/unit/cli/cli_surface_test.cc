// The CLI's surface as a new user meets it (issue 11, "What was found"), each through the binary:
// compile --ir -o refuses instead of writing nothing; run's device banner (and --quiet); --version
// and `kplan version`; `kplan serve`'s refusals; CLI11's errors as one `kplan: error:`
// line with exit 2; defaults in --help; inspect on a directory; a random seed by default that
// --seed repeats; --max-new and --max-context past the context; --stats-json; --stream.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::lines_of;
using test::run_kplan;

class CliSurface : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    scratch_ = new testing_util::TempDir("cli_surface");
    pair_ = test::synth_tiny_pair(scratch_->path());
  }
  static void TearDownTestSuite() {
    delete scratch_;
    scratch_ = nullptr;
  }
  CliResult kplan(const std::string& args) { return run_kplan(args, scratch_->path()); }
  std::string target() const { return pair_.target.string(); }
  static testing_util::TempDir* scratch_;
  static test::SynthPair pair_;
};
testing_util::TempDir* CliSurface::scratch_ = nullptr;
test::SynthPair CliSurface::pair_;

const std::string kPrompt = " --prompt-ids 5,17,42 --device cpu";

TEST_F(CliSurface, CompileIrWithOutputRefusesAndWritesNothing) {
  const fs::path ir = scratch_->path() / "t.ir", out = scratch_->path() / "x.kplan";
  const CliResult dumped = kplan("compile --model " + target() + " --no-weights --dump-ir");
  ASSERT_EQ(dumped.status, 0) << dumped.err;
  std::ofstream(ir) << dumped.out;
  const CliResult r = kplan("compile --ir " + ir.string() + " -o " + out.string());
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("kplan: error: -o " + out.string() + ": a plan is compiled from a checkpoint (--model DIR)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(CliSurface, RunPrintsADeviceBannerUnlessQuiet) {
  CliResult r = kplan("run " + target() + kPrompt + " --max-new 4");
  ASSERT_EQ(r.status, 0) << r.err;
  // The banner is the last line (before it only a phase that took over a second, on a loaded
  // machine, would say so).
  const std::vector<std::string> err = lines_of(r.err);
  ASSERT_GE(err.size(), 1u) << r.err;
  for (const std::string& line : err) EXPECT_EQ(line.rfind("kplan run: ", 0), 0u) << line;
  const std::string& banner = err.back();
  EXPECT_EQ(banner.rfind("kplan run: device CPU reference backend", 0), 0u) << banner;
  EXPECT_NE(banner.find("checkpoint " + target()), std::string::npos) << banner;
  EXPECT_NE(banner.find("weights 7.8 MiB"), std::string::npos) << banner;
  r = kplan("run " + target() + kPrompt + " --max-new 4 --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliSurface, TheLoadPhasesAreShownOnATerminalAndTimedInStats) {
  // Under a pseudo-terminal (util-linux `script`): each phase is announced as it starts and timed.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no util-linux script";
  const fs::path log = scratch_->path() / "tty.log";
  const std::string cmd = "script -qec '" + std::string(KPLAN_BINARY) + " run " + target() + kPrompt +
                          " --max-new 2' /dev/null > " + log.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string tty = testing_util::read_file(log);
  for (const char* want : {"kplan run: reading checkpoint ", "kplan run: loading the model (7.8 MiB of weights) ... ",
                           "kplan run: creating a session (KV cache, graphs) ... "})
    EXPECT_NE(tty.find(want), std::string::npos) << want << " in\n" << tty;
  // Off a terminal the quick phases say nothing (the banner is the one line); --stats times them.
  const CliResult r = kplan("run " + target() + kPrompt + " --max-new 2 --stats --stats-json -");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("stats: load                 "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plan open "), std::string::npos) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_GE(j["load_seconds"]["plan_open"].get<double>(), 0);
  EXPECT_GE(j["load_seconds"]["model_load"].get<double>(), 0);
  EXPECT_GE(j["load_seconds"]["session"].get<double>(), 0);
}

TEST_F(CliSurface, VersionFlagAndCommand) {
  const CliResult flag = kplan("--version"), cmd = kplan("version");
  ASSERT_EQ(flag.status, 0) << flag.err;
  ASSERT_EQ(cmd.status, 0) << cmd.err;
  EXPECT_EQ(flag.out, cmd.out);
  EXPECT_EQ(flag.out.rfind("kplan 0.1.0\n", 0), 0u) << flag.out;
  for (const char* want : {"CUDA toolkit 13.", "NVRTC 13.", "sm_90", "sm_120", "GPU: "})
    EXPECT_NE(flag.out.find(want), std::string::npos) << want << " in\n" << flag.out;
}

TEST_F(CliSurface, ServeRefusesCommandLinesThatCannotWork) {
  // (The server itself: serve_test.cc.)
  CliResult r = kplan("serve " + target() + " --port 70000");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.rfind("kplan: error: --port: Value 70000 not in range", 0), 0u) << r.err;
  r = kplan("serve " + target() + " --device cpu --spec ddtree --port 0");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("kplan: error: --spec ddtree needs a drafter"), std::string::npos) << r.err;
  r = kplan("serve " + (scratch_->path() / "nonexistent.kplan").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("nonexistent.kplan"), std::string::npos) << r.err;
}

TEST_F(CliSurface, ParseErrorsAreOneLineWithExitTwo) {
  for (const std::string& args : std::vector<std::string>{"", "run", "run " + target() + " --bogus 3", "run " + target() + " --max-new x",
                                 "run " + target() + " --device tpu", "inspect"}) {
    SCOPED_TRACE(args);
    const CliResult r = kplan(args);
    EXPECT_EQ(r.status, 2);
    const std::vector<std::string> err = lines_of(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("kplan: error: ", 0), 0u) << err[0];
    EXPECT_NE(err[0].find("--help"), std::string::npos) << err[0];
  }
  const CliResult unknown = kplan("runn " + target());
  EXPECT_EQ(unknown.status, 2);
  EXPECT_EQ(unknown.err.rfind("kplan: error: unknown command 'runn' (commands: compile, inspect, run, bench, synth, "
                              "soak, version, serve, chat",
                              0),
            0u)
      << unknown.err;
  // A command line that parses but cannot work is a usage error too.
  const CliResult r = kplan("run " + target() + " --prompt-ids 1 --prompt hi");
  EXPECT_EQ(r.status, 2) << r.err;
}

TEST_F(CliSurface, HelpShowsDefaults) {
  const CliResult run = kplan("run --help");
  ASSERT_EQ(run.status, 0);
  for (const char* want : {"--max-new INT=16", "--budget TEXT=16", "--seed UINT=random", "--device TEXT:{cpu,gpu,auto}=auto",
                           "--temperature FLOAT=0", "--top-p FLOAT=1", "--drafter TEXT:{dflash,oracle,random}=dflash",
                           "--oracle-accuracy FLOAT=0.8", "--max-context INT=0"})
    EXPECT_NE(run.out.find(want), std::string::npos) << want;
  EXPECT_NE(kplan("compile --help").out.find("--arch TEXT=sm_90"), std::string::npos);
  EXPECT_NE(kplan("bench --help").out.find("--steps INT="), std::string::npos);
  EXPECT_NE(kplan("synth --help").out.find("--seed UINT="), std::string::npos);
}

TEST_F(CliSurface, InspectOnADirectoryIsAClearError) {
  const CliResult r = kplan("inspect " + target());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a directory, not a .kplan file"), std::string::npos) << r.err;
}

// The seed line of --stats, and the ids line of stdout.
std::pair<std::string, std::string> seed_and_ids(const CliResult& r) {
  std::string seed;
  for (const std::string& line : lines_of(r.err))
    if (line.rfind("stats: seed", 0) == 0) seed = test::fields_of(line)[2];
  return {seed, lines_of(r.out).empty() ? "" : lines_of(r.out)[0]};
}

TEST_F(CliSurface, TheSeedIsRandomUnlessGivenAndStatsPrintIt) {
  const std::string sample = "run " + target() + kPrompt + " --max-new 12 --temperature 1.5 --stats -q";
  const auto [seed_a, ids_a] = seed_and_ids(kplan(sample));
  const auto [seed_b, ids_b] = seed_and_ids(kplan(sample));
  ASSERT_FALSE(seed_a.empty());
  EXPECT_NE(seed_a, seed_b) << "two runs without --seed draw different seeds";
  EXPECT_NE(ids_a, ids_b) << "... and (with 12 tokens at temperature 1.5 over 1024 ids) different samples";
  const auto [seed_c, ids_c] = seed_and_ids(kplan(sample + " --seed " + seed_a));
  EXPECT_EQ(seed_c, seed_a);
  EXPECT_EQ(ids_c, ids_a) << "--seed repeats a run";
}

TEST_F(CliSurface, MaxNewPastTheContextIsAnErrorNamingBoth) {
  const CliResult r = kplan("run " + target() + kPrompt + " --max-context 32 --max-new 40");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--max-new 40 does not fit: the prompt's 3 tokens and 40 new ones need 42 cache positions, "
                       "the context holds 32 (--max-new 30 fits)"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(kplan("run " + target() + kPrompt + " --max-context 32 --max-new 30 --ignore-eos").status, 0);
}

TEST_F(CliSurface, MaxContextPastThePlansIsAnError) {
  // tiny's max_position_embeddings: 512.
  const CliResult r = kplan("run " + target() + kPrompt + " --max-context 1000");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--max-context 1000 is past the plan's context of 512 positions"), std::string::npos) << r.err;
}

TEST_F(CliSurface, StatsJsonHasTheFiguresAndTokensPerSecond) {
  const CliResult r = kplan("run " + target() + kPrompt + " --draft " + pair_.draft.string() +
                            " --max-new 10 --ignore-eos --seed 3 --stats-json - -q");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string ids = lines_of(r.out)[0];
  const nlohmann::json j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["format"], "kplan-run-stats-1");
  EXPECT_EQ(j["generated_tokens"], 10);
  EXPECT_EQ(j["seed"], 3);
  EXPECT_EQ(j["stop_reason"], "max-new");
  EXPECT_GT(j["tokens_per_second"].get<double>(), 0);
  EXPECT_NEAR(j["tokens_per_second"].get<double>(), 10 / j["wall_seconds"].get<double>(), 1e-6);
  int64_t rounds = 0;
  for (int64_t n : j["acceptance_histogram"]) rounds += n;
  EXPECT_EQ(rounds, j["rounds"]);
  std::string joined;
  for (int t : j["tokens"]) joined += (joined.empty() ? "" : " ") + std::to_string(t);
  EXPECT_EQ(joined, ids);
}

TEST_F(CliSurface, StreamPrintsTheSameTokens) {
  const std::string base = "run " + target() + kPrompt + " --draft " + pair_.draft.string() + " --max-new 12 -q";
  const CliResult plain = kplan(base), streamed = kplan(base + " --stream");
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(streamed.status, 0) << streamed.err;
  EXPECT_EQ(streamed.out, lines_of(plain.out)[0] + " \n") << "ids, each followed by a space, then a newline";
}

}  // namespace
}  // namespace kplan
