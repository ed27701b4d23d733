// Synthetic weights on the GPU (`kplan compile --synthetic-weights`): the weights the device
// generates at load are bit for bit the host's (runtime/cpu/synthetic_weights.h) — every kind,
// read back at both ends and in the middle of each weight — and the GPU decode of a 2-layer
// synthetic slice (dense layer + one MoE layer of INT4 experts) agrees with the CPU reference
// over the same plan. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "kplan/kplan.h"
#include "runtime/cpu/synthetic_weights.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/device_layout.h"
#include "runtime/gpu/gpu_model.h"
#include "runtime/gpu/synthetic_weights.h"
#include "schemas/plan_reader.h"
#include "tests/unit/cpu/synthetic_slice.h"
#include "tests/unit/runtime/greedy_near_tie.h"
#include "tests/unit/runtime/session_target.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;

// The launch a weight gets: every unit covered by the stride, one block of the kernel's size.
TEST(SyntheticLaunch, CoversTheWeight) {
  plan::Plan p;
  plan::Kernel k;
  k.family = "synthetic_weights";
  k.constants = {{"KIND", 0}, {"OUT_DT", 1}, {"GROUP", 0}, {"THREADS", 256}};
  p.kernels.push_back(k);
  plan::Weight w;
  w.name = "w";
  w.dtype = DType::BF16;
  w.shape = {3, 1u << 31};  // past 2^32 elements: n_hi carries the rest
  w.synthetic = plan::SyntheticInit{4, 5, plan::SyntheticKind::Normal, 1.0f, 0.1f, 0, 0};
  const gpu::SyntheticLaunch l = gpu::synthetic_launch(p, w, 0x1000, 132);
  EXPECT_EQ(l.block, 256u);
  EXPECT_EQ(l.grid, 132u * 16u);
  EXPECT_EQ((static_cast<uint64_t>(static_cast<uint32_t>(l.n_hi)) << 32) | static_cast<uint32_t>(l.n_lo), uint64_t{3} << 31);
  EXPECT_EQ(l.mean, 1.0f);
  w.shape = {10};
  EXPECT_EQ(gpu::synthetic_launch(p, w, 0x1000, 132).grid, 1u);
}

// The plan's GPU decode against its CPU reference: a prefill of `ids` (logits within the bf16
// tolerance, the relative error printed under `label`), then `greedy` tokens generated from it
// by both, identical up to a near-tie (greedy_near_tie.h: with bf16 activations a random-weight
// model's close logits may part them).
void expect_gpu_matches_cpu(const fs::path& plan_file, const std::vector<int32_t>& ids, int greedy, const char* label) {
  PlanHandle gpu_plan(plan_file.string(), KPLAN_DEVICE_GPU);
  PlanHandle cpu_plan(plan_file.string(), KPLAN_DEVICE_CPU);
  SessionTargetModel gpu(gpu_plan);
  SessionTargetModel cpu(cpu_plan);
  ASSERT_TRUE(gpu.on_gpu());
  StepInput in{ids, {}, {}};
  for (size_t i = 0; i < ids.size(); ++i) in.positions.push_back(static_cast<int32_t>(i));
  const StepOutput g = gpu.forward(in), c = cpu.forward(in);
  ASSERT_EQ(g.logits.data.size(), c.logits.data.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < c.logits.data.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(g.logits.data[i]) - c.logits.data[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(c.logits.data[i])));
  }
  std::printf("[ figures  ] %s: GPU vs CPU logits rel error %.3g over %zu logits\n", label, diff / scale, c.logits.data.size());
  EXPECT_LE(diff / scale, 1e-2);
  gpu.reset();
  cpu.reset();
  std::vector<int32_t> got_gpu(static_cast<size_t>(greedy)), got_cpu(static_cast<size_t>(greedy));
  ASSERT_EQ(kplan_session_generate_greedy(gpu.session(), ids.data(), static_cast<int32_t>(ids.size()), greedy, got_gpu.data()),
            KPLAN_STATUS_OK)
      << kplan_error_last();
  ASSERT_EQ(kplan_session_generate_greedy(cpu.session(), ids.data(), static_cast<int32_t>(ids.size()), greedy, got_cpu.data()),
            KPLAN_STATUS_OK)
      << kplan_error_last();
  cpu::CpuTarget reference(std::make_shared<const plan::Plan>(plan::read_plan(plan_file.string(), {.verify_weights = false})),
                           plan_file.string(), 0);
  testing_util::expect_greedy_up_to_a_near_tie(reference, ids, got_gpu, got_cpu, label);
}

class GpuSynthetic : public ::testing::Test {
 protected:
  testing_util::TempDir dir{"gpu_synthetic"};
};

TEST_F(GpuSynthetic, DeviceWeightsEqualTheHostsAndDecodeMatchesTheCpu) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  const auto model = synthetic_test::config_dir(synthetic_test::tiny_int4(), dir.path() / "config");
  const fs::path plan_file = dir.path() / "slice.kplan";
  const test::CliResult r = synthetic_test::compile_slice(model, 2, 11, plan_file, "--arch " + arch);
  ASSERT_EQ(r.status, 0) << r.err;

  {  // The device's bytes against the host's, every weight, three windows each.
    auto p = std::make_shared<const plan::Plan>(plan::read_plan(plan_file));
    gpu::GpuModel m(p, plan_file.string());
    EXPECT_GT(m.synthetic_weight_bytes(), 0u);
    EXPECT_EQ(m.weight_upload_bytes(), 0u);
    m.make_current();
    std::vector<bool> used(p->weights.size(), false);
    for (const plan::Bucket& b : p->buckets)
      for (const plan::Launch& l : b.launches)
        for (const plan::LaunchArg& a : l.args)
          if (a.kind == plan::ArgKind::Weight) used[a.index] = true;
    int checked = 0, frag = 0;
    for (size_t i = 0; i < p->weights.size(); ++i) {
      const plan::Weight& w = p->weights[i];
      if (!used[i]) continue;
      ASSERT_TRUE(w.synthetic);
      const uint64_t units = plan::synthetic_units(w), each = dtype_size(w.dtype), window = std::min<uint64_t>(units, 4096);
      if (gpu::int4_frag_columns(w) > 0) {  // INT4 experts in int4_frag order: the host's bytes laid out so, whole
        std::vector<uint8_t> want;
        gpu::to_device_layout(w, cpu::synthetic_bytes(w, 0, units), want);
        std::vector<uint8_t> got(want.size());
        ASSERT_EQ(m.driver().cuMemcpyDtoH(got.data(), m.weight_address(static_cast<uint32_t>(i), 0), got.size()), CUDA_SUCCESS);
        ASSERT_EQ(got, want) << w.name << " (int4_frag order)";
        ++checked, ++frag;
        continue;
      }
      for (uint64_t first : {uint64_t{0}, (units - window) / 2, units - window}) {
        const std::vector<uint8_t> want = cpu::synthetic_bytes(w, first, window);
        std::vector<uint8_t> got(want.size());
        ASSERT_EQ(m.driver().cuMemcpyDtoH(got.data(), m.weight_address(static_cast<uint32_t>(i), first * each), got.size()),
                  CUDA_SUCCESS);
        ASSERT_EQ(got, want) << w.name << " units " << first << "..+" << window;
      }
      ++checked;
    }
    EXPECT_GT(checked, 10);
    EXPECT_EQ(frag, 6);  // the MoE layer's three expert matrices and their scales
  }

  expect_gpu_matches_cpu(plan_file, {3, 14, 15, 92, 65, 35, 89, 79}, 12, "synthetic 2-layer slice");
}

// The same at Kimi K2.6's full width (tests/data/kimi-k2.6/config.json: hidden 7168, 64 heads,
// 384 INT4 experts, vocabulary 163840): a 2-layer slice (the dense layer and one MoE layer),
// GPU against the CPU reference over the same plan, logits within the bf16 tolerance and the
// greedy continuation identical. The CPU side generates ~15 GB of weights on the host and runs
// them single-threaded, so it runs where KPLAN_TEST_K26_SLICE=1 is set (tools/device/width_check.sh);
// the plan has compile's default bf16 activations (and so bf16-staged INT4 experts, heuristics'
// moe_x_bf16); KPLAN_TEST_K26_ACTIVATIONS=f32 compiles it with f32 ones.
TEST_F(GpuSynthetic, KimiK26WidthTwoLayerSliceMatchesTheCpu) {
  const std::string arch = gpu_arch();
  if (arch.empty()) GTEST_SKIP() << "no GPU on this machine";
  if (!std::getenv("KPLAN_TEST_K26_SLICE")) GTEST_SKIP() << "KPLAN_TEST_K26_SLICE is not set (~15 GB of host weights)";
  const fs::path model = fs::path(KPLAN_SOURCE_DIR) / "tests/data/kimi-k2.6";
  const fs::path plan_file = dir.path() / "k26_l2.kplan";
  const char* activations = std::getenv("KPLAN_TEST_K26_ACTIVATIONS");
  const std::string flags = "--arch " + arch + " --max-context 64" + (activations ? std::string(" --activations ") + activations : "");
  const test::CliResult r = synthetic_test::compile_slice(model, 2, 5, plan_file, flags);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_gpu_matches_cpu(plan_file, {163584, 1008, 4539, 150000}, 3, "K2.6-width 2-layer slice");
}

}  // namespace
}  // namespace kplan
