// Synthetic weights (`kplan compile --synthetic-weights SEED`) on the host: the generator
// (ir/support/synthetic_values.h) is a pure function of (seed, stream, index) with pinned values
// (computed by an independent Python transcription of the formula), the INT4 parts are exactly
// compiler/frontend's compressed-tensors quantisation of the virtual float weight, the values
// have the distributions the plan records, and the CPU reference over a synthetic slice plan
// equals the CPU reference over a checkpoint that holds the same values.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/frontend/int4_pack.h"
#include "ir/support/dtype.h"
#include "ir/support/synthetic_values.h"
#include "runtime/cpu/synthetic_weights.h"
#include "runtime/plan_cpu_target.h"
#include "tests/unit/cpu/cpu_test_util.h"
#include "tests/unit/cpu/synthetic_slice.h"

namespace kplan {
namespace {

namespace s = synthetic;
using cpu_test::causal_step;

plan::Weight normal_weight(DType dtype, std::vector<int64_t> shape, float mean, float stddev, uint64_t seed = 1,
                           uint64_t stream = 2) {
  plan::Weight w;
  w.name = "test.weight";
  w.dtype = dtype;
  w.shape = std::move(shape);
  w.synthetic = plan::SyntheticInit{seed, stream, plan::SyntheticKind::Normal, mean, stddev, 0, 0};
  w.size = dtype_size(dtype) * plan::synthetic_units(w);
  return w;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// The formula of synthetic_values.h written out again with other means (uint64_t shifts, a
// lambda per step), for the comparison below.
float direct_value(uint64_t seed, uint64_t stream, uint64_t index, float mean, double stddev) {
  auto finalise = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const uint64_t key = finalise(seed ^ finalise(stream + 0x632BE59BD9B4E019ull));
  const uint64_t bits = finalise(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  int64_t sum = 0;
  for (int part = 0; part < 4; ++part) sum += static_cast<int64_t>((bits >> (16 * part)) & 0xFFFF);
  const float step = static_cast<float>(stddev / std::sqrt((65536.0 * 65536.0 - 1.0) / 3.0));
  return static_cast<float>(mean + static_cast<double>(sum - 131070) * step);
}

TEST(SyntheticValues, PinnedValuesOfTheFormula) {
  // python3: see the header's formula; key(1, 2) and the first three values at std 1 and at
  // mean 1, std 0.1. A change here changes every synthetic plan's weights.
  const uint64_t key = s::weight_key(1, 2);
  EXPECT_EQ(key, 0x86230e8d4c110529ull);
  const float step = s::step_for(1.0), step_norm = s::step_for(0.1);
  const uint32_t want[3] = {0x3f12776fu, 0x4011bc60u, 0xbec8d632u};
  const uint32_t want_norm[3] = {0x3f8752c6u, 0x3f9d25adu, 0x3f75f54au};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(bits_of(s::value(key, i, 0.0f, step)), want[i]) << i;
    EXPECT_EQ(bits_of(s::value(key, i, 1.0f, step_norm)), want_norm[i]) << i;
  }
}

TEST(SyntheticValues, DeterministicAndEqualToTheDirectFormula) {
  const plan::Weight w = normal_weight(DType::F32, {64, 96}, 0.25f, 0.05f, 9, 1234);
  const std::vector<float> a = cpu::synthetic_floats(w), b = cpu::synthetic_floats(w);
  ASSERT_EQ(a.size(), 64u * 96u);
  EXPECT_EQ(a, b);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(bits_of(a[i]), bits_of(direct_value(9, 1234, i, 0.25f, static_cast<double>(0.05f)))) << i;
  // Any range of units is the same bytes (the device writes units in any order).
  const std::vector<uint8_t> part = cpu::synthetic_bytes(w, 1000, 17);
  ASSERT_EQ(part.size(), 17u * 4u);
  EXPECT_EQ(std::memcmp(part.data(), a.data() + 1000, part.size()), 0);
  // Another seed or stream: other values.
  EXPECT_NE(cpu::synthetic_floats(normal_weight(DType::F32, {64, 96}, 0.25f, 0.05f, 10, 1234)), a);
  EXPECT_NE(cpu::synthetic_floats(normal_weight(DType::F32, {64, 96}, 0.25f, 0.05f, 9, 1235)), a);
  // bf16: the f32 values rounded to nearest even.
  const plan::Weight h = normal_weight(DType::BF16, {64, 96}, 0.25f, 0.05f, 9, 1234);
  const std::vector<float> hf = cpu::synthetic_floats(h);
  const std::vector<uint8_t> hb = cpu::synthetic_bytes(h, 0, 64 * 96);
  for (size_t i = 0; i < a.size(); ++i) {
    uint16_t stored;
    std::memcpy(&stored, hb.data() + 2 * i, 2);
    ASSERT_EQ(stored, float_to_bf16(a[i])) << i;
    ASSERT_EQ(hf[i], bf16_to_float(stored)) << i;
  }
  EXPECT_THROW(cpu::synthetic_bytes(w, 64 * 96 - 1, 2), Error);
}

TEST(SyntheticValues, DistributionHasTheRecordedMeanAndStd) {
  for (auto [mean, stddev] : {std::pair{0.0f, 0.0118f}, std::pair{1.0f, 0.1f}}) {
    const std::vector<float> v = cpu::synthetic_floats(normal_weight(DType::F32, {1 << 18}, mean, stddev));
    double sum = 0, sq = 0, lo = 1e30, hi = -1e30;
    for (float x : v) sum += x, sq += static_cast<double>(x) * x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
    const double m = sum / v.size(), sd = std::sqrt(sq / v.size() - m * m);
    EXPECT_NEAR(m, mean, 0.01 * stddev);
    EXPECT_NEAR(sd, stddev, 0.01 * stddev);
    // Irwin-Hall of four: bounded by +-sqrt(12) std, and reaching past 3 std.
    EXPECT_LE(hi - mean, 3.4642 * stddev);
    EXPECT_GT(hi - mean, 3.0 * stddev);
    EXPECT_LT(lo - mean, -3.0 * stddev);
  }
}

// An INT4 module of `experts` x [out, in] as the plan records it: packed words and scales of
// one stream, and the virtual float weight they quantise.
struct Int4Parts {
  plan::Weight packed, scale, virtual_float;
};
Int4Parts int4_parts(int64_t experts, int64_t out, int64_t in, int64_t group, float stddev) {
  Int4Parts p;
  p.packed.name = "m.weight_packed";
  p.packed.dtype = DType::I32;
  p.packed.shape = {experts, out, in / 8};
  p.packed.synthetic = plan::SyntheticInit{5, 77, plan::SyntheticKind::Int4Packed, 0.0f, stddev, static_cast<uint32_t>(group), 0};
  p.scale.name = "m.weight_scale";
  p.scale.dtype = DType::BF16;
  p.scale.shape = {experts, out, in / group};
  p.scale.synthetic = plan::SyntheticInit{5, 77, plan::SyntheticKind::Int4Scale, 0.0f, stddev, static_cast<uint32_t>(group), 0};
  p.virtual_float = normal_weight(DType::F32, {experts * out, in}, 0.0f, stddev, 5, 77);
  for (plan::Weight* w : {&p.packed, &p.scale}) w->size = dtype_size(w->dtype) * plan::synthetic_units(*w);
  return p;
}

TEST(SyntheticValues, Int4PartsAreTheCheckpointQuantisationOfTheVirtualWeight) {
  for (int64_t group : {32, 16}) {
    SCOPED_TRACE(group);
    const int64_t E = 3, out = 20, in = 64;
    const Int4Parts p = int4_parts(E, out, in, group, 1.0f / 8.0f);
    const std::vector<float> w = cpu::synthetic_floats(p.virtual_float);
    // compiler/frontend's compressed-tensors packer (what `kplan synth --int4` writes).
    const PackedInt4 want = pack_int4(w, E * out, in, group);
    const std::vector<int32_t> words = cpu::synthetic_words(p.packed);
    ASSERT_EQ(words.size(), want.packed.size());
    for (size_t i = 0; i < words.size(); ++i) ASSERT_EQ(words[i], want.packed[i]) << "word " << i;
    const std::vector<float> scales = cpu::synthetic_floats(p.scale);
    ASSERT_EQ(scales.size(), want.scale.size());
    for (size_t i = 0; i < scales.size(); ++i) ASSERT_EQ(scales[i], bf16_to_float(want.scale[i])) << "scale " << i;
    // Any single word, computed alone (as a device thread does), is the same word.
    for (uint64_t j : {0ull, 7ull, 123ull, static_cast<unsigned long long>(words.size() - 1)}) {
      const std::vector<uint8_t> b = cpu::synthetic_bytes(p.packed, j, 1);
      int32_t one;
      std::memcpy(&one, b.data(), 4);
      EXPECT_EQ(one, words[j]);
    }
  }
}

TEST(SyntheticValues, DequantisedInt4KeepsTheStd) {
  const float stddev = 1.0f / std::sqrt(7168.0f);
  const Int4Parts p = int4_parts(4, 64, 1024, 32, stddev);
  const std::vector<int32_t> words = cpu::synthetic_words(p.packed);
  const std::vector<float> scales = cpu::synthetic_floats(p.scale);
  double sq = 0;
  const size_t n = words.size() * 8;
  for (size_t i = 0; i < n; ++i) {
    const int q = static_cast<int>((static_cast<uint32_t>(words[i / 8]) >> (4 * (i % 8))) & 0xF) - 8;
    const double v = q * static_cast<double>(scales[i / 32]);
    sq += v * v;
  }
  EXPECT_NEAR(std::sqrt(sq / n), stddev, 0.03 * stddev);
}

class SyntheticSlice : public ::testing::Test {
 protected:
  testing_util::TempDir dir{"synthetic_slice"};
};

// The CPU reference decodes a 2-layer slice (the dense layer + one MoE layer with INT4 experts)
// of a synthetic plan exactly as it decodes a checkpoint holding the same values.
TEST_F(SyntheticSlice, CpuReferenceMatchesACheckpointOfTheSameValues) {
  const ModelConfig config = synthetic_test::tiny_int4();
  const auto model = synthetic_test::config_dir(config, dir.path() / "config");
  const auto plan_file = dir.path() / "slice.kplan";
  const test::CliResult r = synthetic_test::compile_slice(model, 2, 7, plan_file, "--buckets 1,4");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("synthetic, seed 7: generated at load"), std::string::npos) << r.err;
  auto plan = std::make_shared<const plan::Plan>(plan::read_plan(plan_file));
  EXPECT_EQ(plan->model.num_hidden_layers, 2);
  bool int4 = false;
  for (const plan::Weight& w : plan->weights) {
    ASSERT_TRUE(w.synthetic) << w.name;
    int4 = int4 || w.synthetic->kind == plan::SyntheticKind::Int4Packed;
  }
  EXPECT_TRUE(int4);

  ModelConfig sliced = config;
  slice_layers(sliced, 2);
  synthetic_test::materialize(*plan, sliced, dir.path() / "ckpt");

  const std::vector<int32_t> prompt = {3, 14, 15, 92, 65};
  auto synthetic = make_plan_cpu_target(plan, plan_file.string(), 16);
  auto checkpoint = testing_util::reference_target(dir.path() / "ckpt", 16);
  const Matrix a = synthetic->forward(causal_step(prompt, 0)).logits;
  const Matrix b = checkpoint->forward(causal_step(prompt, 0)).logits;
  ASSERT_EQ(a.data.size(), b.data.size());
  EXPECT_EQ(a.data, b.data);
  // Real logits: finite and spread (lm_head std 4 / sqrt(hidden)).
  double sq = 0;
  for (float x : a.data) {
    ASSERT_TRUE(std::isfinite(x));
    sq += static_cast<double>(x) * x;
  }
  EXPECT_GT(std::sqrt(sq / a.data.size()), 0.5);

  // Another seed: other weights, other logits.
  const auto other_file = dir.path() / "other.kplan";
  ASSERT_EQ(synthetic_test::compile_slice(model, 2, 8, other_file, "--buckets 1,4").status, 0);
  auto other = make_plan_cpu_target(std::make_shared<const plan::Plan>(plan::read_plan(other_file)), "other", 16);
  EXPECT_NE(other->forward(causal_step(prompt, 0)).logits.data, a.data);
}

}  // namespace
}  // namespace kplan
