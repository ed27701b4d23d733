// `kplan synth` through the CLI binary: a preset run writes a checkpoint the frontend reads;
// bad usage exits non-zero with one clear line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/synth.h"
#include "tests/unit/synth/synth_test_util.h"

namespace kplan {
namespace {

using synth_test::read_file;
using synth_test::TempDir;
namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

RunResult run_kplan(const std::string& args) {
  RunResult r;
  const std::string command = std::string(KPLAN_BINARY) + " " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

int line_count(const std::string& s) {
  int lines = 0;
  for (char c : s) lines += c == '\n';
  return lines;
}

TEST(SynthCli, TinyWithDrafterMatchesTheLibrary) {
  TempDir dir("cli");
  const fs::path out = dir.path() / "tiny", draft = dir.path() / "draft";
  RunResult r = run_kplan("synth tiny --seed 1 --out " + out.string() + " --draft " + draft.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out / "config.json"));
  auto ckpt = SafetensorsCheckpoint::open(out);
  EXPECT_EQ(ckpt.names().size(), target_tensor_specs(load_model_config(out / "config.json")).size());
  EXPECT_TRUE(fs::exists(draft / "model.safetensors"));
  // The CLI writes exactly what the library writes.
  synthesize_target(preset_config("tiny"), dir.path() / "lib", {.seed = 1});
  EXPECT_EQ(read_file(out / "model.safetensors"), read_file(dir.path() / "lib" / "model.safetensors"));
  EXPECT_EQ(read_file(out / "config.json"), read_file(dir.path() / "lib" / "config.json"));
}

TEST(SynthCli, Int4AndShards) {
  TempDir dir("cli_int4");
  RunResult r = run_kplan("synth tiny --int4 --shard-mb 1 --out " + dir.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.path() / "model.safetensors.index.json"));
  const ModelConfig c = load_model_config(dir.path() / "config.json");
  EXPECT_TRUE(c.quant.enabled);
  EXPECT_TRUE(SafetensorsCheckpoint::open(dir.path()).contains("model.layers.1.mlp.experts.0.gate_proj.weight_packed"));
}

TEST(SynthCli, FromConfigFileWritesItBackVerbatim) {
  TempDir dir("cli_config");
  synthesize_target(preset_config("tiny2"), dir.path() / "src", {.seed = 1});
  RunResult r = run_kplan("synth --config " + (dir.path() / "src" / "config.json").string() + " --seed 1 --out " +
                          (dir.path() / "copy").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_file(dir.path() / "src" / "config.json"), read_file(dir.path() / "copy" / "config.json"));
  EXPECT_EQ(read_file(dir.path() / "src" / "model.safetensors"), read_file(dir.path() / "copy" / "model.safetensors"));
}

TEST(SynthCli, UnknownPresetIsOneClearLine) {
  TempDir dir("cli_bad");
  RunResult r = run_kplan("synth huge --out " + dir.path().string());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("unknown synth preset 'huge'"), std::string::npos) << r.output;
}

TEST(SynthCli, PresetAndConfigTogetherOrNeitherIsRefused) {
  TempDir dir("cli_usage");
  RunResult neither = run_kplan("synth --out " + dir.path().string());
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_EQ(line_count(neither.output), 1) << neither.output;
  EXPECT_NE(neither.output.find("either a PRESET or --config"), std::string::npos) << neither.output;
  RunResult no_out = run_kplan("synth tiny");
  EXPECT_NE(no_out.exit_code, 0);
  EXPECT_NE(no_out.output.find("--out"), std::string::npos) << no_out.output;
}

TEST(SynthCli, RealSizeConfigIsRefused) {
  TempDir dir("cli_k26");
  RunResult r = run_kplan("synth --config " + std::string(KPLAN_TEST_DATA_DIR) + "/kimi-k2.6/config.json --out " +
                          dir.path().string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(line_count(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("over the limit"), std::string::npos) << r.output;
}

TEST(SynthCli, HelpListsTheOptions) {
  RunResult r = run_kplan("synth --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* opt : {"--config", "--out", "--draft", "--int4", "--seed", "--shard-mb"})
    EXPECT_NE(r.output.find(opt), std::string::npos) << opt;
}

}  // namespace
}  // namespace kplan
