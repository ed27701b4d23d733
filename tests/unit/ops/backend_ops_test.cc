// The backend-ops test (like ggml's test-backend-ops): each row of op_table.cc is a minimal IR
// function run by (a) the CPU interpreter, the reference; (b) the lowering and the launch
// emulator, on CI, which checks strides, offsets and slot reuse and computes with the CPU ops;
// (c) the real kernels on the GPU, where there is one. Every op kind has a row. (b) and (c) run
// twice: with f32 activations, and with bf16 ones (kplan compile --activations bf16: the row's inputs and
// cache stored as bf16, its "logits" output f32) within max(the row's tolerance, 1e-2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "compiler/passes/lower_to_launches.h"
#include "ir/op_kind.h"
#include "tests/unit/codegen/codegen_test_util.h"
#include "tests/unit/codegen/launch_emulator.h"
#include "tests/unit/ops/gpu_runner.h"
#include "tests/unit/ops/reference.h"

namespace kplan::ops_test {
namespace {

using codegen::testing_util::LaunchEmulator;
using codegen::testing_util::relative_error;

uint64_t seed_of(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h;
}

// A row built and run on the CPU reference.
struct Built {
  StepData step;
  std::unique_ptr<CaseBuilder> builder;
  std::optional<std::vector<float>> expected;
  std::vector<float> reference;
  ::kplan::testing_util::TempDir dir{"ops"};
};

std::unique_ptr<Built> build(const OpCase& c) {
  auto b = std::make_unique<Built>();
  b->step = make_step(c, seed_of(c.name));
  b->builder = std::make_unique<CaseBuilder>(b->step, seed_of(c.name));
  b->expected = c.build(*b->builder);
  Reference ref(b->builder->fn(), b->builder->weights, b->dir.path());
  b->reference = ref.run(b->step);
  float mag = 0;
  for (float v : b->reference) mag = std::max(mag, std::fabs(v));
  EXPECT_GT(mag, 0.f) << c.name << ": an all-zero result would check nothing";
  return b;
}

// The row lowered for one bucket of exactly its tokens, with the emulator holding its step.
struct Lowered {
  plan::LoweredPlan plan;
  std::unique_ptr<LaunchEmulator> emu;
  std::vector<uint8_t> image;  // the arena before the step (inputs and cache rows written)
};

Lowered lower(const Built& b, DType activations = DType::F32) {
  Lowered l;
  const std::vector<TestWeight>& weights = b.builder->weights;
  codegen::LowerOptions o;
  o.activations = activations;
  o.kv_cache = activations;  // bf16: the activations and the caches
  o.buckets = {b.step.tokens};
  o.max_context = b.step.past + b.step.tokens + 3;
  l.plan = codegen::lower_target(b.builder->fn(), [&](const std::string& name) {
    for (const TestWeight& w : weights)
      if (w.name == name) return std::span<const uint8_t>(w.bytes);
    throw Error("ops test: no weight " + name);
  }, o);
  l.emu = std::make_unique<LaunchEmulator>(l.plan);
  l.emu->write_input(plan::StepInputKind::Tokens, b.step.ids);
  l.emu->write_input(plan::StepInputKind::Positions, b.step.positions);
  l.emu->write_input(plan::StepInputKind::TreeMask, b.step.tree_mask);
  l.emu->write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{static_cast<int32_t>(b.step.past)});
  l.emu->write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(b.step.tokens)});
  for (const plan::KvCache& kv : l.plan.kv_caches) {
    const std::vector<float>& rows = b.step.cache.data;
    if (kv.row_bytes == static_cast<uint64_t>(b.step.cache_width) * 2) {  // a bf16 cache
      std::vector<uint16_t> h(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) h[i] = float_to_bf16(rows[i]);
      std::memcpy(l.emu->slot(kv.slot), h.data(), h.size() * 2);
    } else {
      std::memcpy(l.emu->slot(kv.slot), rows.data(), rows.size() * 4);
    }
  }
  l.image = l.emu->arena();
  return l;
}

// "logits" read from an arena image; a kv_append result is the whole cache slot, of which the
// row's S+T rows are compared.
std::vector<float> logits_of(const plan::LoweredPlan& lp, const std::vector<uint8_t>& arena, size_t want) {
  const plan::Bucket& bucket = lp.buckets.at(0);
  for (const plan::StepOutput& o : bucket.outputs) {
    if (o.kind != plan::OutputKind::Logits) continue;
    std::vector<float> v(std::min<size_t>(o.rows * o.cols, want));
    std::memcpy(v.data(), arena.data() + lp.buffers.slots.at(o.slot).offset + o.offset, v.size() * 4);
    return v;
  }
  throw Error("ops test: the lowered row has no logits output");
}

std::string test_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string n = op_table()[info.param].name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

class BackendOps : public ::testing::TestWithParam<size_t> {};

// (a) against (b), or against the hand-written expectation where there is no lowering yet.
TEST_P(BackendOps, CpuAndEmulator) {
  const OpCase& c = op_table()[GetParam()];
  std::unique_ptr<Built> b = build(c);
  if (b->expected) {
    EXPECT_LT(relative_error(b->reference, *b->expected), c.tol) << c.name << ": CPU op against ir/OPS.md";
  }
  if (!c.lowered) {
    ASSERT_TRUE(b->expected) << c.name << ": a row without a lowering needs an independent expectation";
    EXPECT_THROW(lower(*b), Error) << c.name << " is marked as having no lowering, but it lowers: mark the row lowered";
    return;
  }
  Lowered l = lower(*b);
  l.emu->run(l.plan.buckets.at(0));
  EXPECT_LT(relative_error(logits_of(l.plan, l.emu->arena(), b->reference.size()), b->reference), c.tol) << c.name << ": emulator";
}

// (b) with bf16 activations.
TEST_P(BackendOps, EmulatorWithBf16Activations) {
  const OpCase& c = op_table()[GetParam()];
  if (!c.lowered) GTEST_SKIP() << c.name << ": no lowering yet";
  std::unique_ptr<Built> b = build(c);
  Lowered l = lower(*b, DType::BF16);
  l.emu->run(l.plan.buckets.at(0));
  EXPECT_LT(relative_error(logits_of(l.plan, l.emu->arena(), b->reference.size()), b->reference), std::max(c.tol, 1e-2))
      << c.name << ": emulator, bf16 activations";
}

// (c) against (a) on the GPU, with f32 and with bf16 activations.
void expect_gpu_row(const OpCase& c, DType activations) {
  if (!c.lowered) GTEST_SKIP() << c.name << ": no GPU lowering yet";
  std::string why;
  GpuRunner* gpu = GpuRunner::get(&why);
  if (!gpu) GTEST_SKIP() << why;
  std::unique_ptr<Built> b = build(c);
  Lowered l = lower(*b, activations);
  const std::vector<uint8_t> after = gpu->run(l.plan, l.plan.buckets.at(0), l.image);
  const double tol = activations == DType::F32 ? c.tol : std::max(c.tol, 1e-2);
  EXPECT_LT(relative_error(logits_of(l.plan, after, b->reference.size()), b->reference), tol)
      << c.name << ": GPU, " << dtype_name(activations) << " activations";
}
TEST_P(BackendOps, Gpu) { expect_gpu_row(op_table()[GetParam()], DType::F32); }
TEST_P(BackendOps, GpuWithBf16Activations) { expect_gpu_row(op_table()[GetParam()], DType::BF16); }

INSTANTIATE_TEST_SUITE_P(Table, BackendOps, ::testing::Range<size_t>(0, op_table().size()), test_name);

TEST(BackendOpsTable, EveryOpKindHasARowAndNamesAreUnique) {
  std::set<ir::OpKind> covered;
  std::set<std::string> names;
  for (const OpCase& c : op_table()) {
    EXPECT_TRUE(names.insert(c.name).second) << "two rows named " << c.name;
    CaseBuilder b(make_step(c, 1), 1);
    c.build(b);
    for (const ir::Op* op : b.fn().ops()) covered.insert(op->kind());
  }
  for (int k = 0; k < ir::kNumOpKinds; ++k)
    EXPECT_TRUE(covered.count(static_cast<ir::OpKind>(k))) << "no row of op_table.cc uses " << ir::op_kind_name(static_cast<ir::OpKind>(k));
}

}  // namespace
}  // namespace kplan::ops_test
