// The GPU runtime's mechanics on a toy plan of real NVRTC cubins: weights upload, step inputs,
// one CUDA graph per bucket (and plain launches), bucket choice with padding, tree masks and the
// KV commit, checked exactly against a host model. Skips without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tests/unit/plan/sample_plan.h"
#include "runtime/gpu/gpu_device.h"
#include "runtime/gpu/gpu_executor.h"
#include "runtime/gpu/gpu_target_model.h"
#include "tests/unit/runtime/toy_plan.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

// The GPU's arch, or "" (and the test skips) when there is none.
std::string gpu_arch() {
  gpu::DeviceInfo info;
  std::string why;
  if (!gpu::probe_device(&info, &why)) return "";
  return info.arch;
}

#define REQUIRE_GPU()                                    \
  const std::string arch = gpu_arch();                   \
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine"

fs::path toy_plan_file(const std::string& arch, const std::string& name) {
  fs::path dir = plan::testing::scratch_dir("kplan_gpu_test");
  plan::Plan p = testing::toy_plan({arch});
  write_plan(p, dir / name);
  return dir / name;
}

void expect_same(const Matrix& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.data.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got.data[i], want[i]) << what << " at " << i;
}

// Prefill (padded into the 4-token bucket), decode steps, a tree step with a partial commit.
void run_sequence(gpu::GpuTargetModel& model) {
  testing::ToyReference ref;
  StepInput prefill{{5, 9, 2}, {0, 1, 2}, {}};
  expect_same(model.forward(prefill).logits, ref.forward(prefill.tokens, prefill.positions, {}), "prefill");
  model.commit(std::vector<int32_t>{0, 1, 2});
  ref.commit({0, 1, 2});
  for (int step = 0; step < 3; ++step) {
    StepInput d{{11 + step}, {static_cast<int32_t>(model.cache_length())}, {}};
    expect_same(model.forward(d).logits, ref.forward(d.tokens, d.positions, {}), "decode " + std::to_string(step));
    model.commit(std::vector<int32_t>{0});
    ref.commit({0});
  }
  // Tree: root 20, children 21 (depth 1) and 22 (depth 1), grandchild 23 under 22.
  int32_t s = static_cast<int32_t>(model.cache_length());
  StepInput tree{{20, 21, 22, 23}, {s, s + 1, s + 1, s + 2}, {0b0001, 0b0011, 0b0101, 0b1101}};
  expect_same(model.forward(tree).logits, ref.forward(tree.tokens, tree.positions, tree.tree_mask), "tree");
  model.commit(std::vector<int32_t>{0, 2, 3});
  ref.commit({0, 2, 3});
  EXPECT_EQ(model.cache_length(), 9);
  StepInput after{{30}, {static_cast<int32_t>(model.cache_length())}, {}};
  expect_same(model.forward(after).logits, ref.forward(after.tokens, after.positions, {}), "after the tree commit");
}

// A toy plan opened through the C API with one model and one session, closed in reverse order.
struct ToySession {
  kplan_plan* plan = nullptr;
  kplan_model* model = nullptr;
  kplan_session* session = nullptr;
  ~ToySession() {
    if (session) kplan_session_destroy(session);
    if (model) kplan_model_destroy(model);
    if (plan) kplan_plan_close(plan);
  }
};

void open_toy_session(const fs::path& file, ToySession& t) {
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &t.plan), KPLAN_STATUS_OK) << kplan_error_last();
  ASSERT_EQ(kplan_model_create(t.plan, nullptr, &t.model), KPLAN_STATUS_OK) << kplan_error_last();
  ASSERT_EQ(kplan_session_create(t.model, nullptr, &t.session), KPLAN_STATUS_OK) << kplan_error_last();
}

TEST(GpuRuntime, ToyPlanMatchesTheHostModelWithGraphs) {
  REQUIRE_GPU();
  auto p = std::make_shared<const plan::Plan>(plan::read_plan(toy_plan_file(arch, "graphs.kplan")));
  gpu::GpuTargetModel model(p, "toy.kplan", {.use_graphs = true});
  EXPECT_TRUE(model.executor().uses_graphs() || std::getenv("KPLAN_NO_GRAPHS"));
  run_sequence(model);
}

TEST(GpuRuntime, ToyPlanMatchesTheHostModelWithPlainLaunches) {
  REQUIRE_GPU();
  auto p = std::make_shared<const plan::Plan>(plan::read_plan(toy_plan_file(arch, "plain.kplan")));
  gpu::GpuTargetModel model(p, "toy.kplan", {.use_graphs = false});
  EXPECT_FALSE(model.executor().uses_graphs());
  run_sequence(model);
}

TEST(GpuRuntime, ResetStartsAnEmptyCache) {
  REQUIRE_GPU();
  auto p = std::make_shared<const plan::Plan>(plan::read_plan(toy_plan_file(arch, "reset.kplan")));
  gpu::GpuTargetModel model(p, "toy.kplan");
  run_sequence(model);
  model.reset();
  EXPECT_EQ(model.cache_length(), 0);
  run_sequence(model);
}

TEST(GpuRuntime, RefusesAPlanForAnotherArch) {
  REQUIRE_GPU();
  const std::string other = arch == "sm_90" ? "sm_120" : "sm_90";
  auto p = std::make_shared<const plan::Plan>(plan::read_plan(toy_plan_file(other, "other.kplan")));
  try {
    gpu::GpuTargetModel model(p, "other.kplan");
    FAIL() << "a plan with only " << other << " cubins loaded on " << arch;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "other.kplan: plan has " + other + " kernels only; this GPU is " + arch +
                                         ": recompile with --arch " + arch);
  }
}

// kplan_model_create_with_progress on the GPU: the weight upload reports (0, total) first, then
// the bytes copied after each chunk (each weight at least once), never decreasing, ending at the
// total: the plan's weight bytes that its launches read.
TEST(GpuRuntime, ModelCreateReportsTheWeightUpload) {
  REQUIRE_GPU();
  const auto file = toy_plan_file(arch, "upload.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  struct Calls {
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    static void on(void* self, uint64_t done, uint64_t total) { static_cast<Calls*>(self)->seen.push_back({done, total}); }
  } calls;
  kplan_model_options o;
  kplan_model_options_init(&o);
  o.device = KPLAN_DEVICE_GPU;
  kplan_model* model = nullptr;
  ASSERT_EQ(kplan_model_create_with_progress(plan, &o, &Calls::on, &calls, &model), KPLAN_STATUS_OK) << kplan_error_last();
  uint64_t all = 0;  // every weight's bytes: the upload's total is those some launch reads
  for (const plan::Weight& w : testing::toy_plan({arch}).weights) all += w.data().size();
  ASSERT_GE(calls.seen.size(), 2u);
  const uint64_t total = calls.seen.front().second;
  EXPECT_GT(total, 0u);
  EXPECT_LE(total, all);
  EXPECT_EQ(calls.seen.front().first, 0u);
  EXPECT_EQ(calls.seen.back(), (std::pair<uint64_t, uint64_t>{total, total}));
  for (size_t i = 1; i < calls.seen.size(); ++i) {
    EXPECT_GE(calls.seen[i].first, calls.seen[i - 1].first);
    EXPECT_EQ(calls.seen[i].second, total);
  }
  kplan_model_destroy(model);
  kplan_plan_close(plan);
}

TEST(GpuRuntime, CApiStepsAndBenchmarksTheToyPlan) {
  REQUIRE_GPU();
  ToySession toy;
  const auto file = toy_plan_file(arch, "capi.kplan");
  open_toy_session(file, toy);
  if (HasFatalFailure()) return;
  kplan_plan* plan = toy.plan;
  kplan_session* s = toy.session;
  EXPECT_EQ(kplan_session_device(s), KPLAN_DEVICE_GPU);
  int32_t tok[2] = {3, 4}, pos[2] = {0, 1};
  std::vector<float> logits(2 * testing::kToyVocab);
  ASSERT_EQ(kplan_session_step(s, tok, pos, 2, nullptr, logits.data()), KPLAN_STATUS_OK) << kplan_error_last();
  testing::ToyReference ref;
  std::vector<float> want = ref.forward({3, 4}, {0, 1}, {});
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(logits[i], want[i]) << i;
  kplan_bench_result r{};
  ASSERT_EQ(kplan_session_bench_decode(s, 50, 8, &r), KPLAN_STATUS_OK) << kplan_error_last();
  EXPECT_GT(r.step_ms_median, 0.0);
  EXPECT_LE(r.step_ms_min, r.step_ms_median);
  EXPECT_EQ(r.context, 8);
  EXPECT_EQ(r.tokens, 1);
  kplan_bench_result r4{};
  ASSERT_EQ(kplan_session_bench_step(s, 4, 20, 8, &r4), KPLAN_STATUS_OK) << kplan_error_last();
  EXPECT_EQ(r4.tokens, 4);
  EXPECT_GT(r4.step_ms_median, 0.0);
  EXPECT_EQ(r4.moe_layers, 0) << "the toy model has no MoE layer";
  EXPECT_EQ(kplan_session_bench_step(s, 3, 20, 8, &r4), KPLAN_STATUS_ERROR) << "no bucket of exactly 3 tokens";
  // Each launch timed on its own (events between launches): one figure per launch of the bucket.
  std::vector<kplan_kernel_time> launches(16);
  int32_t n = 0;
  ASSERT_EQ(kplan_session_bench_kernels(s, 4, 10, 8, launches.data(), 16, &n), KPLAN_STATUS_OK) << kplan_error_last();
  const plan::Plan toy_plan = plan::read_plan(file);
  const plan::Bucket* b4 = toy_plan.bucket_for("target", 4);
  ASSERT_NE(b4, nullptr);
  ASSERT_EQ(n, static_cast<int32_t>(b4->launches.size()));
  for (int32_t i = 0; i < n; ++i) {
    EXPECT_EQ(launches[i].launch, i);
    EXPECT_GT(launches[i].ms_median, 0.0) << i;
    EXPECT_LT(launches[i].ms_median, 50 * r4.step_ms_median + 1.0) << i;
    EXPECT_EQ(std::string(launches[i].kernel), toy_plan.kernels[b4->launches[i].kernel].id);
    EXPECT_GT(launches[i].weight_bytes + launches[i].activation_bytes, 0.0) << i;
  }
  EXPECT_EQ(kplan_session_bench_kernels(s, 3, 10, 8, launches.data(), 16, &n), KPLAN_STATUS_ERROR) << "no bucket of exactly 3 tokens";
  EXPECT_EQ(kplan_session_bench_kernels(s, 4, 10, 8, nullptr, 16, &n), KPLAN_STATUS_ERROR) << "room without a buffer";
  int32_t buckets[4] = {};
  EXPECT_EQ(kplan_plan_buckets_get(plan, buckets, 4), 2);
  EXPECT_EQ(buckets[0], 1);
  EXPECT_EQ(buckets[1], 4);
}

// Two sessions on one model: the weights go to the device once (measured by free device memory
// and by the model's upload count), each session has its own KV cache, and both match the host
// model. The toy's one weight is padded to 256 MiB so the upload dwarfs a session's arena.
TEST(GpuRuntime, TwoSessionsOnOneModelUploadTheWeightsOnce) {
  REQUIRE_GPU();
  plan::Plan toy = testing::toy_plan({arch});
  constexpr uint64_t kBallast = 256ull << 20;
  toy.weights[0].owned.resize(kBallast);  // the kernel reads the first kToyVocab floats only
  toy.weights[0].shape = {static_cast<int64_t>(kBallast / 4)};
  auto p = std::make_shared<const plan::Plan>(std::move(toy));
  uint64_t free0 = 0, free1 = 0, free2 = 0, free3 = 0, total = 0;
  gpu::device_memory(&free0, &total);
  auto model = std::make_shared<const gpu::GpuModel>(p, "toy (ballast)");
  gpu::device_memory(&free1, &total);
  EXPECT_GE(free0 - free1, kBallast) << "the model holds the weights";
  EXPECT_EQ(model->weight_uploads(), 1);
  EXPECT_EQ(model->weight_upload_bytes(), kBallast);
  {
    gpu::GpuTargetModel a(model);
    gpu::device_memory(&free2, &total);
    gpu::GpuTargetModel b(model);
    gpu::device_memory(&free3, &total);
    std::printf("[ figures  ] model %.1f MiB, session a %.1f MiB, session b %.1f MiB\n", (free0 - free1) / 1048576.0,
                (free1 - free2) / 1048576.0, (free2 - free3) / 1048576.0);
    EXPECT_LT(free1 - free2, kBallast / 4) << "a session must not upload the weights again";
    EXPECT_LT(free2 - free3, kBallast / 4) << "a second session must not upload the weights again";
    EXPECT_EQ(model->weight_uploads(), 1);
    // Separate KV caches: a's sequence, then b's from empty, both exact.
    run_sequence(a);
    EXPECT_EQ(b.cache_length(), 0);
    run_sequence(b);
    EXPECT_EQ(a.cache_length(), 9);
  }
}

// The same through the C API: model info counts one upload however many sessions there are.
TEST(GpuRuntime, CApiSessionsShareTheModelsWeights) {
  REQUIRE_GPU();
  fs::path file = toy_plan_file(arch, "shared.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_model* model = nullptr;
  ASSERT_EQ(kplan_model_create(plan, nullptr, &model), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_model_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(kplan_model_info_get(model, &info), KPLAN_STATUS_OK);
  EXPECT_EQ(info.device, KPLAN_DEVICE_GPU);
  EXPECT_EQ(info.weight_uploads, 1);
  EXPECT_EQ(info.weight_upload_bytes, static_cast<uint64_t>(testing::kToyVocab * 4));
  EXPECT_EQ(info.max_step_tokens, 4);
  kplan_session *a = nullptr, *b = nullptr;
  ASSERT_EQ(kplan_session_create(model, nullptr, &a), KPLAN_STATUS_OK) << kplan_error_last();
  ASSERT_EQ(kplan_session_create(model, nullptr, &b), KPLAN_STATUS_OK) << kplan_error_last();
  ASSERT_EQ(kplan_model_info_get(model, &info), KPLAN_STATUS_OK);
  EXPECT_EQ(info.sessions, 2);
  EXPECT_EQ(info.weight_uploads, 1);
  // A prompt longer than the largest bucket (4) is chunked: 10 tokens through generate.
  std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<int32_t> got_a(3), got_b(3);
  ASSERT_EQ(kplan_session_generate_greedy(a, prompt.data(), 10, 3, got_a.data()), KPLAN_STATUS_OK) << kplan_error_last();
  ASSERT_EQ(kplan_session_generate_greedy(b, prompt.data(), 10, 3, got_b.data()), KPLAN_STATUS_OK) << kplan_error_last();
  EXPECT_EQ(got_a, got_b);
  kplan_session_destroy(a);
  kplan_model_destroy(model);  // b keeps what it uses alive
  int32_t tok = 3, pos = 0;
  ASSERT_EQ(kplan_session_reset(b), KPLAN_STATUS_OK);
  EXPECT_EQ(kplan_session_step(b, &tok, &pos, 1, nullptr, nullptr), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_session_destroy(b);
  kplan_plan_close(plan);
}

TEST(GpuRuntime, ABudgetWhoseVerifyExceedsTheLargestBucketIsRefusedUpFront) {
  REQUIRE_GPU();
  ToySession toy;
  open_toy_session(toy_plan_file(arch, "budget.kplan"), toy);
  if (HasFatalFailure()) return;
  kplan_session* s = toy.session;
  kplan_generate_options o;
  kplan_generate_options_init(&o);
  o.spec = KPLAN_SPEC_DDTREE;
  o.drafter = KPLAN_DRAFTER_RANDOM;
  o.budget = 4;  // the toy plan's largest bucket is 4 tokens: a 5-token verify cannot run
  o.max_new = 4;
  std::vector<int32_t> prompt = {1, 2, 3}, out(4);
  int32_t n = 0;
  EXPECT_EQ(kplan_session_generate(s, prompt.data(), 3, &o, out.data(), 4, &n, nullptr), KPLAN_STATUS_ERROR);
  const std::string error = kplan_error_last();
  for (const char* part : {"DDTree budget 4 verifies 5 tokens", "largest bucket (4 tokens)", "--budget 3 or less", "--buckets"})
    EXPECT_NE(error.find(part), std::string::npos) << error;
  EXPECT_EQ(n, 0);
}

}  // namespace
}  // namespace kplan
