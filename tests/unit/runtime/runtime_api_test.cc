// The runtime's C API without a GPU: "no GPU" reported cleanly, plan errors carried through
// kplan_error_last, sections described, and the CPU reference serving a plan exactly as it
// serves the checkpoint the plan came from.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "schemas/plan_writer.h"
#include "compiler/synth/synth.h"
#include "kplan/kplan.h"
#include "kplan/session_target_model.h"
#include "runtime/plan_stats.h"
#include "tests/unit/plan/sample_plan.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

fs::path test_dir() {
  return plan::testing::scratch_dir("kplan_runtime_test");
}

bool have_gpu() {
  kplan_device_info info;
  return kplan_device_probe(&info) == KPLAN_STATUS_OK;
}

fs::path sample_plan_file(const std::string& name) {
  plan::Plan p = plan::testing::sample_plan();
  fs::path file = test_dir() / name;
  plan::write_plan(p, file);
  return file;
}

TEST(RuntimeApi, ReportsNoGpuCleanly) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  kplan_device_info info;
  EXPECT_EQ(kplan_device_probe(&info), KPLAN_STATUS_NO_GPU);
  EXPECT_EQ(std::string(kplan_error_last()).rfind("no GPU: ", 0), 0u) << kplan_error_last();
}

TEST(RuntimeApi, AGpuSessionWithoutAGpuSaysNoGpu) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  fs::path file = sample_plan_file("nogpu.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_session_options o{KPLAN_DEVICE_GPU, 1, 0};
  kplan_session* s = nullptr;
  EXPECT_EQ(kplan_session_create(plan, &o, &s), KPLAN_STATUS_NO_GPU);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(std::string(kplan_error_last()).rfind("no GPU: ", 0), 0u) << kplan_error_last();
  kplan_plan_close(plan);
}

TEST(RuntimeApi, OpenCarriesTheReadersMessage) {
  fs::path file = test_dir() / "empty.kplan";
  std::ofstream(file) << "KPLX and more";
  kplan_plan* plan = nullptr;
  EXPECT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_ERROR);
  EXPECT_EQ(plan, nullptr);
  EXPECT_NE(std::string(kplan_error_last()).find("not a kplan plan"), std::string::npos) << kplan_error_last();
}

TEST(RuntimeApi, DescribesEverySection) {
  fs::path file = sample_plan_file("describe.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  const char* text = nullptr;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_SUMMARY, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("archs:        sm_90,sm_120"), std::string::npos) << text;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_KERNELS, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("embedding_v16_h8_bf16"), std::string::npos) << text;
  EXPECT_NE(std::string(text).find("sm_120:"), std::string::npos) << text;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_LAUNCHES, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("in:tokens"), std::string::npos) << text;
  EXPECT_NE(std::string(text).find("bucket target/4: 2 launches"), std::string::npos) << text;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_MEMORY, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("KV cache layer0.latent"), std::string::npos) << text;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_WEIGHTS, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("int4_pack8_k"), std::string::npos) << text;
  ASSERT_EQ(kplan_plan_describe(plan, KPLAN_PLAN_SECTION_IR, &text), KPLAN_STATUS_OK);
  EXPECT_NE(std::string(text).find("embedding(%tokens)"), std::string::npos) << text;
  kplan_plan_close(plan);
}

TEST(RuntimeApi, InfoCountsTheBytesADecodeStepReads) {
  fs::path file = sample_plan_file("info.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_plan_info info{};
  ASSERT_EQ(kplan_plan_info_get(plan, &info), KPLAN_STATUS_OK);
  // embed 256 B (one row of 16: 16 B), lm_head 259 B (all), expert 17600 B (top-2 of 8 experts).
  EXPECT_EQ(info.weight_bytes, 256u + 259u + 17600u);
  EXPECT_EQ(info.decode_read_bytes, 256u / 1024u + 259u + 17600u * 2u / 8u);
  EXPECT_EQ(info.kv_bytes_per_token, 32u);
  EXPECT_EQ(info.num_archs, 2);
  int32_t buckets[1] = {};
  EXPECT_EQ(kplan_plan_buckets_get(plan, buckets, 1), 2) << "counts every bucket, writes what fits";
  EXPECT_EQ(buckets[0], 1);
  EXPECT_STREQ(info.archs[1], "sm_120");
  kplan_plan_close(plan);
}

// A plan carrying a synthesised tiny checkpoint's tensors and config (no kernels needed for CPU).
fs::path tiny_checkpoint_plan(fs::path* ckpt_dir) {
  fs::path dir = test_dir() / "tiny";
  ModelConfig config = preset_config("tiny");
  synthesize_target(config, dir, {.seed = 1});
  // The model's own IR and every weight it names, from the checkpoint's reference plan.
  const plan::Plan ref = reference_plan(dir);
  plan::Plan p = plan::testing::sample_plan();
  p.kernels.clear();
  p.buckets.clear();
  p.weights.clear();
  std::ifstream cfg(dir / "config.json");
  p.model_config_json.assign(std::istreambuf_iterator<char>(cfg), {});
  p.model = config;
  p.ir_text = ref.ir_text;
  p.header.limits = {8, 8, 64};
  for (const plan::Weight& r : ref.weights) {
    plan::Weight w;
    w.name = r.name;
    w.source = r.source;
    w.dtype = r.dtype;
    w.shape = r.shape;
    w.layout = r.layout;
    w.owned.assign(r.data().begin(), r.data().end());
    p.weights.push_back(std::move(w));
  }
  fs::path file = test_dir() / "tiny.kplan";
  plan::write_plan(p, file);
  *ckpt_dir = dir;
  return file;
}

TEST(RuntimeApi, CpuSessionOverAPlanMatchesTheCheckpointReference) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  PlanHandle plan(file.string());
  SessionTargetModel session(plan, kplan_session_options{KPLAN_DEVICE_CPU, 1, 0});
  EXPECT_FALSE(session.on_gpu());
  std::unique_ptr<TargetModel> direct = testing_util::reference_target(ckpt, 64);
  StepInput prompt{{0, 17, 300, 5, 999}, {0, 1, 2, 3, 4}, {}};
  StepOutput a = session.forward(prompt);
  StepOutput b = direct->forward(prompt);
  ASSERT_EQ(a.logits.data.size(), b.logits.data.size());
  for (size_t i = 0; i < a.logits.data.size(); ++i) ASSERT_EQ(a.logits.data[i], b.logits.data[i]) << i;
  EXPECT_EQ(session.max_context(), 64);
}

TEST(RuntimeApi, GreedyGenerationOnTheCpuMatchesAStepByStepLoop) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  PlanHandle plan(file.string());
  SessionTargetModel session(plan, kplan_session_options{KPLAN_DEVICE_CPU, 1, 0});
  std::vector<int32_t> prompt = {0, 17, 300, 5, 999, 42, 7, 8, 9, 10};  // > 8: prefilled in two chunks
  std::vector<int32_t> got(6);
  ASSERT_EQ(kplan_session_generate_greedy(session.session(), prompt.data(), static_cast<int32_t>(prompt.size()), 6,
                                          got.data()),
            KPLAN_STATUS_OK)
      << kplan_error_last();
  std::unique_ptr<TargetModel> direct = testing_util::reference_target(ckpt, 64);
  StepInput in{prompt, {}, {}};
  for (size_t i = 0; i < prompt.size(); ++i) in.positions.push_back(static_cast<int32_t>(i));
  std::vector<int32_t> want;
  for (int step = 0; step < 6; ++step) {
    StepOutput o = direct->forward(in);
    std::vector<int32_t> keep;
    for (size_t i = 0; i < in.tokens.size(); ++i) keep.push_back(static_cast<int32_t>(i));
    direct->commit(keep);
    const float* row = o.logits.row(o.logits.rows - 1);
    int32_t next = static_cast<int32_t>(std::max_element(row, row + o.logits.cols) - row);
    want.push_back(next);
    in = StepInput{{next}, {static_cast<int32_t>(direct->cache_length())}, {}};
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace kplan

namespace kplan {
namespace {

TEST(RuntimeCli, BenchWithoutAGpuSaysNoGpu) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  std::string cmd = std::string(KPLAN_BINARY) + " bench " + sample_plan_file("bench.kplan").string() + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[1024] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, p);
  int raw = ::pclose(p);
  EXPECT_EQ(WEXITSTATUS(raw), 1);
  EXPECT_EQ(std::string(buf, n).rfind("kplan: error: no GPU: ", 0), 0u) << buf;
}

}  // namespace
}  // namespace kplan
