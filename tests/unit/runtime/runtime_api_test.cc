// The runtime's C API without a GPU: "no GPU" reported cleanly, plan errors carried through
// kplan_error_last, sections described, and the CPU reference serving a plan exactly as it
// serves the checkpoint the plan came from.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/tensor_spec.h"
#include "schemas/plan_writer.h"
#include "compiler/synth/synth.h"
#include "kplan/kplan.h"
#include "tests/unit/runtime/session_target.h"
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
  kplan_model_options o;
  kplan_model_options_init(&o);
  o.device = KPLAN_DEVICE_GPU;
  kplan_model* m = nullptr;
  EXPECT_EQ(kplan_model_create(plan, &o, &m), KPLAN_STATUS_NO_GPU);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(std::string(kplan_error_last()).rfind("no GPU: ", 0), 0u) << kplan_error_last();
  kplan_plan_close(plan);
}

// kplan_plan_open_with_progress: the weight bytes hashed, from 0 to all of them, each call with
// the total; none when the checksums are not verified. kplan_model_create_with_progress on the
// CPU reference: not called (nothing is copied at create).
TEST(RuntimeApi, OpeningAPlanReportsTheBytesHashed) {
  const fs::path file = sample_plan_file("progress.kplan");
  struct Calls {
    std::vector<std::pair<uint64_t, uint64_t>> seen;
    static void on(void* self, uint64_t done, uint64_t total) { static_cast<Calls*>(self)->seen.push_back({done, total}); }
  } calls;
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open_with_progress(file.c_str(), nullptr, &Calls::on, &calls, &plan), KPLAN_STATUS_OK)
      << kplan_error_last();
  uint64_t total = 0;
  for (const plan::Weight& w : plan::testing::sample_plan().weights) total += w.data().size();
  ASSERT_GE(calls.seen.size(), 2u);
  EXPECT_EQ(calls.seen.front(), std::make_pair(uint64_t{0}, total));
  EXPECT_EQ(calls.seen.back(), std::make_pair(total, total));
  kplan_model_options o;
  kplan_model_options_init(&o);
  o.device = KPLAN_DEVICE_CPU;
  calls.seen.clear();
  kplan_model* model = nullptr;
  ASSERT_EQ(kplan_model_create_with_progress(plan, &o, &Calls::on, &calls, &model), KPLAN_STATUS_OK) << kplan_error_last();
  EXPECT_TRUE(calls.seen.empty());
  kplan_model_destroy(model);
  kplan_plan_close(plan);

  kplan_plan_open_options no_verify{0};
  ASSERT_EQ(kplan_plan_open_with_progress(file.c_str(), &no_verify, &Calls::on, &calls, &plan), KPLAN_STATUS_OK);
  EXPECT_TRUE(calls.seen.empty());
  kplan_plan_close(plan);
  // A null callback is plain kplan_plan_open.
  ASSERT_EQ(kplan_plan_open_with_progress(file.c_str(), nullptr, nullptr, nullptr, &plan), KPLAN_STATUS_OK);
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
  EXPECT_EQ(kplan_plan_info_get(plan, &info), KPLAN_STATUS_ERROR) << "struct_size unset";
  EXPECT_NE(std::string(kplan_error_last()).find("struct_size"), std::string::npos) << kplan_error_last();
  info.struct_size = sizeof info;
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
  PlanHandle plan(file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel session(plan);
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
  PlanHandle plan(file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel session(plan);
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

// Two sessions on one model: one model, one weight placement (the query the GPU test also makes
// with device memory), separate KV caches, identical results.
TEST(RuntimeApi, TwoSessionsOnOneModelShareItAndKeepTheirOwnCaches) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_model_options mo;
  kplan_model_options_init(&mo);
  mo.device = KPLAN_DEVICE_CPU;
  kplan_model* model = nullptr;
  ASSERT_EQ(kplan_model_create(plan, &mo, &model), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_plan_close(plan);  // the model keeps what it needs of the plan
  kplan_model_info before{};
  before.struct_size = sizeof before;
  ASSERT_EQ(kplan_model_info_get(model, &before), KPLAN_STATUS_OK);
  EXPECT_EQ(before.device, KPLAN_DEVICE_CPU);
  EXPECT_EQ(before.sessions, 0);
  EXPECT_EQ(before.weight_uploads, 0);
  kplan_session *a = nullptr, *b = nullptr;
  ASSERT_EQ(kplan_session_create(model, nullptr, &a), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_model_info one{};
  one.struct_size = sizeof one;
  ASSERT_EQ(kplan_model_info_get(model, &one), KPLAN_STATUS_OK);
  EXPECT_EQ(one.weight_uploads, 1) << "the first session reads the weights into the model's fp32 copy";
  EXPECT_GT(one.weight_upload_bytes, 0u);
  ASSERT_EQ(kplan_session_create(model, nullptr, &b), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_model_info after{};
  after.struct_size = sizeof after;
  ASSERT_EQ(kplan_model_info_get(model, &after), KPLAN_STATUS_OK);
  EXPECT_EQ(after.sessions, 2);
  EXPECT_EQ(after.weight_uploads, 1) << "a second session reads no weight again";
  EXPECT_EQ(after.weight_upload_bytes, one.weight_upload_bytes);

  int32_t tok[3] = {4, 8, 15}, pos[3] = {0, 1, 2};
  std::vector<float> la(3 * 1024), lb(3 * 1024);
  ASSERT_EQ(kplan_session_step(a, tok, pos, 3, nullptr, la.data()), KPLAN_STATUS_OK) << kplan_error_last();
  int32_t keep[3] = {0, 1, 2};
  ASSERT_EQ(kplan_session_commit(a, keep, 3), KPLAN_STATUS_OK);
  EXPECT_EQ(kplan_session_cache_length(a), 3);
  EXPECT_EQ(kplan_session_cache_length(b), 0) << "b has its own cache";
  ASSERT_EQ(kplan_session_step(b, tok, pos, 3, nullptr, lb.data()), KPLAN_STATUS_OK) << kplan_error_last();
  EXPECT_EQ(la, lb);
  kplan_model_destroy(model);  // sessions keep it alive
  ASSERT_EQ(kplan_session_commit(b, keep, 3), KPLAN_STATUS_OK);
  kplan_session_destroy(a);
  kplan_session_destroy(b);
}

// The C API's own loop chunks too: a session capped at 8 tokens per step decodes a 200-token
// prompt, in AR, DFlash and DDTree, exactly as an uncapped session.
TEST(RuntimeApi, GenerateChunksAPromptLongerThanTheLargestStep) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  PlanHandle plan(file.string(), KPLAN_DEVICE_CPU);
  auto session = [&](int64_t cap) {
    kplan_session_options o;
    kplan_session_options_init(&o);
    o.max_context = 256;
    o.max_step_tokens = cap;
    kplan_session* s = nullptr;
    EXPECT_EQ(kplan_session_create(plan.model(), &o, &s), KPLAN_STATUS_OK) << kplan_error_last();
    return s;
  };
  kplan_session* whole = session(0);
  kplan_session* capped = session(8);
  EXPECT_EQ(kplan_session_max_step_tokens(capped), 8);
  std::vector<int32_t> prompt(200);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % 1024);
  int32_t too_long[9] = {};
  int32_t at[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(kplan_session_step(capped, too_long, at, 9, nullptr, nullptr), KPLAN_STATUS_ERROR);
  EXPECT_NE(std::string(kplan_error_last()).find("exceeds the session's largest step (8 tokens)"), std::string::npos);

  auto generate = [&](kplan_session* s, kplan_spec_mode spec, kplan_drafter_kind drafter, kplan_generate_stats* st) {
    kplan_generate_options g;
    kplan_generate_options_init(&g);
    g.spec = spec;
    g.drafter = drafter;
    g.budget = 5;
    g.max_new = 6;
    g.stop_at_eos = 0;
    std::vector<int32_t> out(6);
    int32_t n = 0;
    EXPECT_EQ(kplan_session_generate(s, prompt.data(), 200, &g, out.data(), 6, &n, st), KPLAN_STATUS_OK)
        << kplan_error_last();
    out.resize(static_cast<size_t>(n));
    return out;
  };
  kplan_generate_stats stats{};
  stats.struct_size = sizeof stats;
  const std::vector<int32_t> want = generate(whole, KPLAN_SPEC_NONE, KPLAN_DRAFTER_DFLASH, nullptr);
  ASSERT_EQ(want.size(), 6u);
  EXPECT_EQ(generate(capped, KPLAN_SPEC_NONE, KPLAN_DRAFTER_DFLASH, &stats), want) << "AR";
  EXPECT_EQ(stats.prefill_steps, 25);
  EXPECT_EQ(stats.generated_tokens, 6);
  EXPECT_EQ(generate(capped, KPLAN_SPEC_DFLASH, KPLAN_DRAFTER_ORACLE, &stats), want) << "DFlash, oracle";
  EXPECT_EQ(generate(capped, KPLAN_SPEC_DDTREE, KPLAN_DRAFTER_RANDOM, &stats), want) << "DDTree, random";
  EXPECT_GT(stats.rounds, 0);
  kplan_session_destroy(whole);
  kplan_session_destroy(capped);
}

TEST(RuntimeApi, GenerateRefusesBadOptionsClearly) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  PlanHandle plan(file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel s(plan);
  int32_t prompt[2] = {1, 2}, out[4];
  int32_t n = 0;
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.max_new = 4;
  auto refused = [&](const kplan_generate_options& o, int32_t capacity, const std::string& needle) {
    EXPECT_EQ(kplan_session_generate(s.session(), prompt, 2, &o, out, capacity, &n, nullptr), KPLAN_STATUS_ERROR);
    EXPECT_NE(std::string(kplan_error_last()).find(needle), std::string::npos) << kplan_error_last();
  };
  refused(g, 2, "out_tokens holds 2 tokens");
  kplan_generate_options unset = g;
  unset.struct_size = 0;
  refused(unset, 4, "struct_size is not set");
  for (double t : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    kplan_generate_options hot = g;
    hot.temperature = t;
    refused(hot, 4, "the temperature must be a finite number >= 0");
  }
  kplan_generate_options tree = g;
  tree.spec = KPLAN_SPEC_DDTREE;
  refused(tree, 4, "needs a drafter");
  kplan_generate_options deep = tree;  // issue 12: a depth of 10^6 ran until killed
  deep.drafter = KPLAN_DRAFTER_RANDOM;
  deep.draft_depth = 1000000;
  refused(deep, 4, "the draft depth 1000000 is past the context");
  tree.drafter = KPLAN_DRAFTER_RANDOM;
  tree.budget = 0;
  refused(tree, 4, "budget must be at least 1");
  // An older caller's smaller struct: the fields it has, defaults for the rest.
  kplan_generate_options old = g;
  old.struct_size = offsetof(kplan_generate_options, temperature);
  EXPECT_EQ(kplan_session_generate(s.session(), prompt, 2, &old, out, 4, &n, nullptr), KPLAN_STATUS_OK)
      << kplan_error_last();
  EXPECT_EQ(n, 4);
}

TEST(RuntimeApi, APlanWithoutATokenizerSaysSo) {
  fs::path file = sample_plan_file("notok.kplan");
  kplan_plan* plan = nullptr;
  ASSERT_EQ(kplan_plan_open(file.c_str(), nullptr, &plan), KPLAN_STATUS_OK) << kplan_error_last();
  int32_t n = -1;
  EXPECT_EQ(kplan_tokenizer_encode(plan, "hi", 2, nullptr, 0, &n), KPLAN_STATUS_ERROR);
  EXPECT_EQ(std::string(kplan_error_last()).rfind("no tokenizer: ", 0), 0u) << kplan_error_last();
  kplan_plan_close(plan);
}

// The stats' acceptance histogram (appended to kplan_generate_stats): its bins sum to the rounds
// and their tokens to committed_in_rounds; a caller compiled before it (struct_size ending at
// seconds_walk_commit) gets the older fields and nothing written past them.
TEST(RuntimeApi, GenerateStatsCarryTheAcceptanceHistogram) {
  fs::path ckpt;
  fs::path file = tiny_checkpoint_plan(&ckpt);
  PlanHandle plan(file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel s(plan);
  const int32_t prompt[3] = {5, 17, 42};
  int32_t out[12];
  int32_t n = 0;
  kplan_generate_options g;
  kplan_generate_options_init(&g);
  g.spec = KPLAN_SPEC_DDTREE;
  g.drafter = KPLAN_DRAFTER_ORACLE;
  g.oracle_accuracy = 0.7;
  g.budget = 4;
  g.max_new = 12;
  g.stop_at_eos = 0;
  kplan_generate_stats stats{};
  stats.struct_size = sizeof stats;
  ASSERT_EQ(kplan_session_generate(s.session(), prompt, 3, &g, out, 12, &n, &stats), KPLAN_STATUS_OK)
      << kplan_error_last();
  int64_t rounds = 0, tokens = 0;
  for (int i = 0; i < KPLAN_ACCEPTANCE_BINS; ++i) {
    rounds += stats.acceptance_histogram[i];
    tokens += (i + 1) * stats.acceptance_histogram[i];
  }
  EXPECT_EQ(rounds, stats.rounds);
  EXPECT_EQ(tokens, stats.committed_in_rounds);
  EXPECT_EQ(stats.committed_in_rounds, 11);

  struct OlderStats {
    kplan_generate_stats stats;
    char after[8];
  } older;
  std::memset(&older, 0x5a, sizeof older);
  older.stats.struct_size = offsetof(kplan_generate_stats, acceptance_histogram);
  ASSERT_EQ(kplan_session_generate(s.session(), prompt, 3, &g, out, 12, &n, &older.stats), KPLAN_STATUS_OK)
      << kplan_error_last();
  EXPECT_EQ(older.stats.rounds, stats.rounds);
  EXPECT_EQ(older.stats.committed_in_rounds, 11);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&older.stats.acceptance_histogram);
  for (size_t i = 0; i < sizeof older.stats.acceptance_histogram; ++i) ASSERT_EQ(bytes[i], 0x5a) << "byte " << i;
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
