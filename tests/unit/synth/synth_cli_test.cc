// `kplan synth` through the CLI binary: a preset run writes a checkpoint the frontend reads;
// bad usage exits non-zero with one clear line.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "compiler/frontend/model_config.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "compiler/synth/synth.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

using namespace testing_util;
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

std::string sha256_of(const fs::path& file) {
  FILE* pipe = ::popen(("sha256sum '" + file.string() + "'").c_str(), "r");
  if (!pipe) return "";
  char buf[65] = {};
  size_t n = std::fread(buf, 1, 64, pipe);
  ::pclose(pipe);
  return std::string(buf, n);
}

// The HuggingFace goldens were computed from checkpoints this CLI wrote; each golden records its
// synth arguments and the files' sha256. Re-synthesising must give the very same bytes, or
// every golden comparison downstream would be against a different model.
TEST(SynthCli, ReproducesTheGoldenCheckpoints) {
  const fs::path goldens = fs::path(KPLAN_TEST_DATA_DIR) / "goldens";
  if (!fs::exists(goldens)) GTEST_SKIP() << "no goldens in " << goldens;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(goldens)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    const nlohmann::json golden = nlohmann::json::parse(in);
    TempDir dir("golden");
    auto synth_and_compare = [&](const nlohmann::json& part, const std::string& sub) {
      std::string args;
      for (const auto& a : part.at("synth_args")) args += " '" + a.get<std::string>() + "'";
      const fs::path out = dir.path() / sub;
      RunResult r = run_kplan("synth" + args + " --out " + out.string());
      ASSERT_EQ(r.exit_code, 0) << r.output;
      for (const auto& [file, sha] : part.at("checkpoint_sha256").items()) {
        EXPECT_EQ(sha256_of(out / file), sha.get<std::string>()) << entry.path().filename() << " " << sub << "/" << file;
        ++checked;
      }
    };
    synth_and_compare(golden, "target");
    // A drafter is written with --draft beside its target; the same arguments name it.
    if (golden.contains("draft") && golden["draft"].contains("checkpoint_sha256")) {
      std::string args;
      for (const auto& a : golden["draft"].at("synth_args")) args += " '" + a.get<std::string>() + "'";
      const fs::path draft = dir.path() / "draft";
      RunResult r = run_kplan("synth" + args + " --out " + (dir.path() / "t2").string() + " --draft " + draft.string());
      ASSERT_EQ(r.exit_code, 0) << r.output;
      for (const auto& [file, sha] : golden["draft"]["checkpoint_sha256"].items()) {
        EXPECT_EQ(sha256_of(draft / file), sha.get<std::string>()) << entry.path().filename() << " draft/" << file;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(SynthCli, MultimodalWrapperConfigGivesPrefixedTensors) {
  // A K2.6-style kimi_k25 wrapper around a tiny text model: tensors carry "language_model.",
  // and --int4 adds a K2.6-like quantization_config to the file, which is otherwise kept.
  TempDir dir("cli_wrapper");
  nlohmann::json text = model_config_to_json(preset_config("tiny"));
  text["model_type"] = "kimi_k2";
  const nlohmann::json wrapper = {{"model_type", "kimi_k25"}, {"text_config", text}, {"vision_config", nlohmann::json::object()}};
  std::ofstream(dir.path() / "wrapper.json") << wrapper.dump(2);
  RunResult r = run_kplan("synth --config " + (dir.path() / "wrapper.json").string() + " --int4 --out " +
                          (dir.path() / "out").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const ModelConfig c = load_model_config(dir.path() / "out" / "config.json");
  EXPECT_EQ(c.tensor_prefix, "language_model.");
  EXPECT_TRUE(c.quant.enabled);
  std::ifstream in(dir.path() / "out" / "config.json");
  EXPECT_EQ(nlohmann::json::parse(in)["text_config"], text);
  auto ckpt = SafetensorsCheckpoint::open(dir.path() / "out");
  EXPECT_TRUE(ckpt.contains("language_model.model.embed_tokens.weight"));
  EXPECT_TRUE(ckpt.contains("language_model.model.layers.1.mlp.experts.7.down_proj.weight_packed"));
  EXPECT_EQ(ckpt.names().size(), target_tensor_specs(c).size());
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
