// Assembling a plan from a lowered program: kernels compiled for every arch through the kernel
// cache, config/tokenizer/IR carried, checkpoint tensors viewed unchanged.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "compiler/codegen/nvrtc_compile.h"
#include "compiler/frontend/checkpoint.h"
#include "compiler/plan/plan_assemble.h"
#include "schemas/plan_reader.h"
#include "compiler/synth/synth.h"

namespace kplan::plan {
namespace {

namespace fs = std::filesystem;

TEST(PlanAssemble, CompilesKernelsForEveryArchAndCarriesTheCheckpoint) {
  fs::path dir = fs::temp_directory_path() / ("kplan_assemble_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  synthesize_target(preset_config("tiny"), dir / "tiny", {.seed = 1});
  std::ofstream(dir / "tiny" / "tokenizer.json") << R"({"model": {}})";
  TargetCheckpoint ckpt = TargetCheckpoint::open(dir / "tiny");

  LoweredPlan lowered;
  codegen::KernelSource k;
  k.family = "scale";
  k.id = "scale_test";
  k.entry = "kplan_scale_test";
  k.params = {{"N", 4}};
  k.signature = {{"y", codegen::ArgKind::DevicePtr}, {"s", codegen::ArgKind::F32}};
  k.source = "extern \"C\" __global__ void kplan_scale_test(float* y, float s) { y[threadIdx.x] *= s; }\n";
  lowered.kernels = {k};
  lowered.weights = checkpoint_weights(ckpt.weights(), ckpt.specs());
  lowered.buffers.slots = {{"y", SlotRole::Scratch, 0, 16, 256}};
  Bucket b;
  Launch l;
  l.block = {4, 1, 1};
  l.args = {LaunchArg::buffer(0), LaunchArg::f32(2.0f)};
  b.launches = {l};
  lowered.buckets = {b};
  lowered.limits = {1, 0, 32};

  AssembleOptions opt;
  opt.archs = {"sm_90", "sm120"};
  opt.kernels.cache_dir = dir / "cache";
  codegen::CompileStats stats;
  Plan p = write_plan_from_compile({dir / "tiny", std::nullopt, "ir text\n", preset_config("tiny"), std::nullopt}, lowered, opt, dir / "tiny.kplan", &stats);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(p.header.archs, (std::vector<std::string>{"sm_90", "sm_120"}));
  EXPECT_EQ(p.header.nvrtc_version, codegen::nvrtc_version());

  Plan back = read_plan(dir / "tiny.kplan");
  ASSERT_EQ(back.kernels.size(), 1u);
  EXPECT_EQ(back.kernels[0].params, (std::vector<ParamType>{ParamType::Pointer, ParamType::F32}));
  EXPECT_EQ(back.kernels[0].param_names, (std::vector<std::string>{"y", "s"}));
  EXPECT_EQ(back.kernels[0].constants, (std::vector<KernelConstant>{{"N", 4}}));
  for (const char* arch : {"sm_90", "sm_120"})
    EXPECT_TRUE(codegen::cubin_has_entry(back.kernels[0].binary_for(arch)->cubin, "kplan_scale_test")) << arch;
  std::ifstream cfg(dir / "tiny" / "config.json");
  EXPECT_EQ(back.model_config_json, std::string(std::istreambuf_iterator<char>(cfg), {}));
  EXPECT_EQ(std::string(back.tokenizer.begin(), back.tokenizer.end()), R"({"model": {}})");
  EXPECT_EQ(back.ir_text, "ir text\n");
  ASSERT_EQ(back.weights.size(), ckpt.specs().size());
  const TensorView& embed = ckpt.weights().get("model.embed_tokens.weight");
  const Weight& w = back.weights[static_cast<size_t>(back.weight_index("model.embed_tokens.weight"))];
  ASSERT_EQ(w.data().size(), embed.bytes.size());
  EXPECT_TRUE(std::equal(w.data().begin(), w.data().end(), embed.bytes.begin()));

  // The second compile of the same kernels hits the cache.
  codegen::CompileStats again;
  assemble_plan({dir / "tiny", std::nullopt, "", preset_config("tiny"), std::nullopt}, lowered, opt, &again);
  EXPECT_EQ(again.hits, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kplan::plan
