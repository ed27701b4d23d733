// `kplan run --prompt TEXT` end to end: a synthesized tiny checkpoint with the synthetic tokenizer
// files beside it tokenizes the prompt (same ids as --prompt-ids with the hand-derived ids),
// prints the ids and a `text:` line; without tokenizer files, or with both or neither prompt
// flag, it is refused with one clear line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "compiler/synth/synth.h"
#include "tests/unit/test_support.h"
#include "tests/unit/tokenizer/synthetic_tokenizer.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

struct CliResult {
  int status = -1;
  std::string out, err;
};

CliResult run_kplan(const std::string& args, const fs::path& scratch) {
  const fs::path out = scratch / "cli.out", err = scratch / "cli.err";
  const std::string cmd = std::string(KPLAN_BINARY) + " " + args + " >" + out.string() + " 2>" + err.string();
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = testing_util::read_file(out);
  r.err = testing_util::read_file(err);
  return r;
}

// A tiny checkpoint (seed 1) in `dir`, with the synthetic tokenizer files when asked.
void make_tiny(const fs::path& dir, bool with_tokenizer) {
  synthesize_target(preset_config("tiny"), dir, {.seed = 1});
  if (with_tokenizer) test::write_synthetic_tokenizer(dir);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
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

TEST(CliPrompt, ExactlyOnePromptFlag) {
  testing_util::TempDir scratch("tok_cli_flags");
  const fs::path model = scratch.path() / "tiny";
  make_tiny(model, true);
  const CliResult neither = run_kplan("run " + model.string() + " --max-new 2", scratch.path());
  EXPECT_EQ(neither.status, 1);
  testing_util::expect_contains(neither.err, {"--prompt", "--prompt-ids"});
  const CliResult both = run_kplan("run " + model.string() + " --prompt x --prompt-ids 1 --max-new 2", scratch.path());
  EXPECT_NE(both.status, 0);
  testing_util::expect_contains(both.err, {"--prompt"});
}

}  // namespace
}  // namespace kplan
