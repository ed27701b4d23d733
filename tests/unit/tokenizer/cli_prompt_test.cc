// `kplan run --prompt TEXT` end to end: a synthesized tiny checkpoint with the synthetic tokenizer
// files beside it tokenizes the prompt (same ids as --prompt-ids with the hand-derived ids),
// prints the ids and a `text:` line; without tokenizer files, or with both or neither prompt
// flag, it is refused with one clear line.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "compiler/synth/synth.h"
#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

using test::CliResult;
using test::lines_of;
using test::run_kplan;

// A tiny checkpoint (seed 1) in `dir`, with the synthetic tokenizer files when asked.
void make_tiny(const fs::path& dir, bool with_tokenizer) {
  SynthOptions options;
  options.seed = 1;
  synthesize_target(preset_config("tiny"), dir, options);
  if (with_tokenizer) test::write_synthetic_tokenizer(dir);
}

TEST(CliPrompt, TextPromptPrintsIdsAndText) {
  testing_util::TempDir scratch("tok_cli");
  const fs::path model = scratch.path() / "tiny";
  make_tiny(model, true);
  const CliResult text = run_kplan("run " + model.string() + " --prompt 'the thing' --max-new 4 --ignore-eos", scratch.path());
  ASSERT_EQ(text.status, 0) << text.err;
  const std::vector<std::string> lines = lines_of(text.out);
  ASSERT_EQ(lines.size(), 2u) << text.out;
  EXPECT_EQ(std::count(lines[0].begin(), lines[0].end(), ' '), 3) << "four ids: " << lines[0];
  EXPECT_EQ(lines[1].rfind("text: ", 0), 0u) << lines[1];

  // "the thing" is [258, 32, 256, 262] (tokenizer_test.cc): the same run by ids gives the same output.
  const CliResult ids = run_kplan("run " + model.string() + " --prompt-ids 258,32,256,262 --max-new 4 --ignore-eos",
                                  scratch.path());
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(ids.out, text.out);
}

TEST(CliPrompt, NoTokenizerIsAClearError) {
  testing_util::TempDir scratch("tok_cli_none");
  const fs::path model = scratch.path() / "tiny";
  make_tiny(model, false);
  const CliResult r = run_kplan("run " + model.string() + " --prompt 'the thing' --max-new 2", scratch.path());
  EXPECT_EQ(r.status, 1);
  testing_util::expect_contains(r.err, {"no tokenizer", "use --prompt-ids"});
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // Without a tokenizer, --prompt-ids prints the ids line only.
  const CliResult ids = run_kplan("run " + model.string() + " --prompt-ids 5,6 --max-new 2 --ignore-eos", scratch.path());
  ASSERT_EQ(ids.status, 0) << ids.err;
  EXPECT_EQ(lines_of(ids.out).size(), 1u) << ids.out;
}

// `kplan compile -o` carries the tokenizer files in the plan: inspect names them, and the plan
// tokenizes and decodes like the directory. A plan compiled without them refuses --prompt.
TEST(CliPrompt, PlanCarriesTheTokenizer) {
  testing_util::TempDir scratch("tok_cli_plan");
  const fs::path model = scratch.path() / "tiny", plan = scratch.path() / "tiny.kplan";
  make_tiny(model, true);
  const CliResult compiled = run_kplan("compile --model " + model.string() + " -o " + plan.string(), scratch.path());
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  const CliResult inspect = run_kplan("inspect " + plan.string(), scratch.path());
  ASSERT_EQ(inspect.status, 0) << inspect.err;
  testing_util::expect_contains(inspect.out, {"tokenizer:    tiktoken, 768 ranks + 256 specials"});

  const std::string args = " --prompt 'the thing' --max-new 4 --ignore-eos";
  const CliResult from_dir = run_kplan("run " + model.string() + args, scratch.path());
  const CliResult from_plan = run_kplan("run " + plan.string() + " --device cpu" + args, scratch.path());
  ASSERT_EQ(from_plan.status, 0) << from_plan.err;
  EXPECT_EQ(from_plan.out, from_dir.out);
  EXPECT_EQ(lines_of(from_plan.out).size(), 2u) << from_plan.out;

  fs::remove(model / "tiktoken.model");
  fs::remove(model / "tokenizer_config.json");
  const fs::path bare = scratch.path() / "bare.kplan";
  ASSERT_EQ(run_kplan("compile --model " + model.string() + " -o " + bare.string(), scratch.path()).status, 0);
  testing_util::expect_contains(run_kplan("inspect " + bare.string(), scratch.path()).out, {"tokenizer:    none"});
  const CliResult refused = run_kplan("run " + bare.string() + " --device cpu --prompt 'the thing'", scratch.path());
  EXPECT_EQ(refused.status, 1);
  testing_util::expect_contains(refused.err, {"no tokenizer", "use --prompt-ids"});
}

TEST(CliPrompt, ExactlyOnePromptFlag) {
  testing_util::TempDir scratch("tok_cli_flags");
  const fs::path model = scratch.path() / "tiny";
  make_tiny(model, true);
  const CliResult neither = run_kplan("run " + model.string() + " --max-new 2", scratch.path());
  EXPECT_EQ(neither.status, 2) << "a usage error";
  testing_util::expect_contains(neither.err, {"--prompt", "--prompt-ids"});
  const CliResult both = run_kplan("run " + model.string() + " --prompt x --prompt-ids 1 --max-new 2", scratch.path());
  EXPECT_NE(both.status, 0);
  testing_util::expect_contains(both.err, {"--prompt"});
}

}  // namespace
}  // namespace kplan
