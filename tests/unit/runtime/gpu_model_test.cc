// The compiled model on the GPU against the HuggingFace goldens and the CPU reference: for each
// golden checkpoint, `kplan synth` re-creates it, `kplan compile -o` builds a plan for this GPU's
// arch four times (the default storage, bf16 activations and KV caches; --activations f32, bf16
// KV caches only; --activations f32 --kv-cache f32, all f32; the default with its long steps'
// matmuls as cuBLASLt calls, kCublasLt), and the GPU session's logits
// (relative error max|a-b|/max|b| per row, against HF and the CPU reference: with bf16
// activations no further than transformers' own bf16 inference lies from the same float32
// goldens, below; <= 1e-2 with bf16 KV caches only, issue 4's bf16 tolerance; <= 1e-4 all f32)
// and greedy continuations (HF's, up to a near-tie: greedy_near_tie.h) are checked, and DDTree on the GPU against the GPU's
// AR. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kplan/kplan.h"
#include "tests/unit/plan/sample_plan.h"
#include "tests/unit/runtime/greedy_near_tie.h"
#include "tests/unit/runtime/session_target.h"
#include "tests/unit/cpu/sha256.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;


double rel_error(const float* got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

// `env`: "NAME=value ..." for the command, or empty.
int run_cli(const std::string& args, const fs::path& log, const std::string& env = "") {
  std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(KPLAN_BINARY) + " " + args + " > " + log.string() + " 2>&1";
  return std::system(cmd.c_str());
}

std::string file_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// transformers' own bf16 inference against its float32 goldens, max|a-b|/max|b| over the golden
// positions (tools/device/hf_bf16_error.py, H100, bench/RESULTS.md 2026-12-06 07:20-07:56): by this
// metric issue 4's 1e-2 is tighter than bf16 itself; kplan's bf16 activations (the residual
// stream, router and logits kept f32) measured 0.95e-2 .. 1.31e-2 there.
double hf_bf16_error(const std::string& golden) {
  if (golden == "tiny") return 1.68e-2;
  if (golden == "tiny2") return 2.15e-2;
  if (golden == "tiny-int4") return 1.88e-2;
  if (golden == "tiny-yarn") return 1.35e-2;
  ADD_FAILURE() << golden << ": no measured transformers bf16 error";
  return 0;
}

const char* const kAllF32 = "--activations f32 --kv-cache f32";
// The default storage with the goldens' weights on the tensor-core path from 4 tokens, so the steps
// of 4 tokens on are cuBLASLt calls (runtime/gpu/library_matmul.h): the prompts' prefills,
// DDTree's verify steps.
const char* const kCublasLt = "--buckets 1,4,8,16,32,64";
std::string compile_env(const std::string& storage) {
  return storage == kCublasLt ? "KPLAN_MATMUL_MMA_MIN_TOKENS=4" : "";
}

// The storage flags' name in test and folder names.
std::string storage_suffix(const std::string& storage) {
  return storage.empty() ? "_bf16_act" : storage == kAllF32 ? "_f32" : storage == kCublasLt ? "_cublaslt" : "_bf16_kv";
}

// (golden name, kplan compile's storage flags: "" the default, bf16 activations and KV caches)
class GpuModelTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(GpuModelTest, MatchesGoldensAndTheCpuReference) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  const auto& [name, storage] = GetParam();
  const double max_rel_error = storage == kAllF32 ? 1e-4 : storage.empty() || storage == kCublasLt ? hf_bf16_error(name) : 1e-2;
  nlohmann::json golden = nlohmann::json::parse(std::ifstream(fs::path(KPLAN_TEST_DATA_DIR) / "goldens" / (name + ".json")));
  fs::path dir = plan::testing::scratch_dir("kplan_gpu_model") / (name + storage_suffix(storage));
  fs::remove_all(dir);
  fs::create_directories(dir);

  std::string synth = "synth";
  for (const auto& a : golden["synth_args"]) synth += " " + a.get<std::string>();
  ASSERT_EQ(run_cli(synth + " --out " + (dir / "ckpt").string(), dir / "synth.log"), 0) << file_text(dir / "synth.log");
  // The goldens describe exactly these bytes: refuse to compare against a different checkpoint.
  for (const auto& [file, hash] : golden["checkpoint_sha256"].items())
    ASSERT_EQ(cpu_test::sha256_file(dir / "ckpt" / file), hash.get<std::string>()) << name << ": synth no longer makes " << file;
  fs::path plan_file = dir / (name + ".kplan");
  ASSERT_EQ(run_cli("compile --model " + (dir / "ckpt").string() + " --arch " + arch + " " + storage + " -o " + plan_file.string(),
                    dir / "compile.log", compile_env(storage)),
            0)
      << file_text(dir / "compile.log");
  if (storage == kCublasLt) {
    const plan::Plan p = plan::read_plan(plan_file.string(), {.verify_weights = false});
    EXPECT_TRUE(std::any_of(p.kernels.begin(), p.kernels.end(), [](const plan::Kernel& k) { return k.library == "cublaslt"; }))
        << "the plan makes no cuBLASLt call";
  }

  PlanHandle gpu_plan(plan_file.string(), KPLAN_DEVICE_GPU);
  PlanHandle cpu_plan(plan_file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel gpu(gpu_plan);
  SessionTargetModel cpu(cpu_plan);
  cpu::CpuTarget reference(std::make_shared<const plan::Plan>(plan::read_plan(plan_file.string(), {.verify_weights = false})),
                           plan_file.string(), 0);
  ASSERT_TRUE(gpu.on_gpu());
  const int64_t vocab = gpu.config().vocab_size;

  std::vector<int32_t> first_greedy;  // the GPU's greedy continuation of the first prompt
  for (const auto& prompt : golden["prompts"]) {
    std::vector<int32_t> ids = prompt["ids"].get<std::vector<int32_t>>();
    StepInput in{ids, {}, {}};
    for (size_t i = 0; i < ids.size(); ++i) in.positions.push_back(static_cast<int32_t>(i));
    gpu.reset();
    cpu.reset();
    StepOutput g = gpu.forward(in);
    StepOutput c = cpu.forward(in);
    ASSERT_EQ(g.logits.cols, vocab);
    const auto& positions = prompt["logits_positions"];
    for (size_t k = 0; k < positions.size(); ++k) {
      int64_t pos = positions[k].get<int64_t>();
      std::vector<float> want = prompt["logits"][k].get<std::vector<float>>();
      double err_hf = rel_error(g.logits.row(pos), want);
      double err_cpu = rel_error(g.logits.row(pos), std::vector<float>(c.logits.row(pos), c.logits.row(pos) + vocab));
      EXPECT_LE(err_hf, max_rel_error) << name << " position " << pos << " vs HF";
      EXPECT_LE(err_cpu, max_rel_error) << name << " position " << pos << " vs CPU";
      std::printf("[ figures  ] %s prompt of %zu, position %lld: rel error vs HF %.3g, vs CPU %.3g\n", name.c_str(),
                  ids.size(), static_cast<long long>(pos), err_hf, err_cpu);
    }
    gpu.reset();
    std::vector<int32_t> want_ids = prompt["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got(want_ids.size());
    ASSERT_EQ(kplan_session_generate_greedy(gpu.session(), ids.data(), static_cast<int32_t>(ids.size()),
                                            static_cast<int32_t>(got.size()), got.data()),
              KPLAN_STATUS_OK)
        << kplan_error_last();
    testing_util::expect_greedy_up_to_a_near_tie(reference, ids, got, want_ids, name + " greedy continuation");
    if (first_greedy.empty()) first_greedy = got;
  }

  // DDTree on the GPU (tree verify with the ancestor mask, KV compaction of the accepted path) is
  // lossless: greedy output equals the GPU's AR continuation, with an oracle and a random drafter;
  // all f32 exactly, with bf16 storage up to a near-tie (the verify steps' kernels are not AR's:
  // other tiles, cuBLASLt calls, other roundings, so where the f32 reference finds two tokens
  // within the bf16 tolerance the tree's step may take the other one).
  const auto& prompt = golden["prompts"][0];
  const std::vector<int32_t> prompt_ids = prompt["ids"].get<std::vector<int32_t>>();
  std::string ids, want;
  for (const auto& v : prompt["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(v.get<int>());
  for (int32_t v : first_greedy) want += (want.empty() ? "" : " ") + std::to_string(v);
  for (const std::string& drafter : {"oracle --budget 8", "random --budget 40"}) {
    fs::path log = dir / "ddtree.log";
    ASSERT_EQ(run_cli("run " + plan_file.string() + " --device gpu --prompt-ids " + ids +
                          " --max-new 16 --ignore-eos --spec ddtree --drafter " + drafter + " --seed 3 --quiet",
                      log),
              0)
        << file_text(log);
    std::string got = file_text(log);
    got = got.substr(0, got.find('\n'));
    if (storage == kAllF32) {
      EXPECT_EQ(got, want) << name << " DDTree (" << drafter << ") on the GPU";
      continue;
    }
    std::vector<int32_t> got_ids;
    std::istringstream words(got);
    for (int32_t t = 0; words >> t;) got_ids.push_back(t);
    testing_util::expect_greedy_up_to_a_near_tie(reference, prompt_ids, got_ids, first_greedy, name + " DDTree (" + drafter + ") on the GPU");
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, GpuModelTest,
                         ::testing::Combine(::testing::Values("tiny", "tiny2", "tiny-int4", "tiny-yarn"),
                                            ::testing::Values("", "--activations f32", kAllF32, kCublasLt)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, std::string>>& p) {
                           std::string n = std::get<0>(p.param) + storage_suffix(std::get<1>(p.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace kplan
