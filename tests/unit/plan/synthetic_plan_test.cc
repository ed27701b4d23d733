// Synthetic weights in the plan file (`kplan compile --synthetic-weights`): an entry without
// bytes survives a write and a read field for field and adds nothing to the data section, and
// validate_plan refuses an entry whose kind, dtype, group, distribution or kernel is wrong,
// naming the weight.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "ir/support/error.h"
#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "tests/unit/plan/sample_plan.h"
#include "tests/unit/test_support.h"

namespace kplan::plan {
namespace {

// The sample plan plus a synthetic_weights kernel of `kind` and a synthetic weight it writes.
Plan synthetic_plan(SyntheticKind kind = SyntheticKind::Int4Packed) {
  Plan p = testing::sample_plan();
  Kernel k;
  k.id = "synthetic_weights_k1_of32_g32_b256";
  k.entry = "kplan_synthetic_weights_k1_of32_g32_b256";
  k.family = "synthetic_weights";
  const int out_dt = kind == SyntheticKind::Int4Packed ? 0 : 1;  // normal values and scales here are bf16
  k.constants = {{"KIND", static_cast<int64_t>(kind)}, {"OUT_DT", out_dt}, {"GROUP", kind == SyntheticKind::Normal ? 0 : 32}, {"THREADS", 256}};
  k.params.assign(std::begin(kSyntheticKernelParams), std::end(kSyntheticKernelParams));
  k.param_names = {"out", "n_lo", "n_hi", "key_lo", "key_hi", "mean", "step"};
  for (const std::string& arch : p.header.archs) k.binaries.push_back({arch, testing::pattern_bytes(200, 3)});
  p.kernels.push_back(k);
  Weight w;
  w.name = "model.layers.1.mlp.experts.*.up_proj.weight_packed";
  w.layout = "stacked";
  w.dtype = kind == SyntheticKind::Int4Packed ? DType::I32 : DType::BF16;
  w.shape = kind == SyntheticKind::Int4Packed ? std::vector<int64_t>{8, 128, 32} : std::vector<int64_t>{8, 128, 8};
  w.synthetic = SyntheticInit{42, 0x1234, kind, 0.0f, 0.0625f, kind == SyntheticKind::Normal ? 0u : 32u,
                              static_cast<uint32_t>(p.kernels.size() - 1)};
  w.size = dtype_size(w.dtype) * synthetic_units(w);
  p.weights.push_back(w);
  return p;
}

TEST(SyntheticPlan, RoundTripsWithoutBytes) {
  testing_util::TempDir dir("synthetic_plan");
  Plan p = synthetic_plan();
  const uint64_t real_bytes = [&] {
    Plan without = testing::sample_plan();
    write_plan(without, dir.path() / "a.kplan");
    return std::filesystem::file_size(dir.path() / "a.kplan");
  }();
  write_plan(p, dir.path() / "s.kplan");
  const Plan back = read_plan(dir.path() / "s.kplan");
  const Weight& w = back.weights.back();
  ASSERT_TRUE(w.synthetic);
  EXPECT_EQ(*w.synthetic, *p.weights.back().synthetic);
  EXPECT_EQ(w.size, 8u * 128u * 32u * 4u);
  EXPECT_TRUE(w.data().empty());
  EXPECT_EQ(w.offset, 0u);
  EXPECT_FALSE(back.weights.front().synthetic);
  // The data section holds the real weights only: the file grew by its metadata, not 128 KiB.
  EXPECT_LT(std::filesystem::file_size(dir.path() / "s.kplan"), real_bytes + 4096);
}

void expect_refused(const std::function<void(Plan&)>& edit, const std::string& message,
                    SyntheticKind kind = SyntheticKind::Int4Packed) {
  Plan p = synthetic_plan(kind);
  edit(p);
  testing_util::expect_contains(testing_util::error_of([&] { validate_plan(p, "s.kplan"); }),
                                {"s.kplan: invalid plan: weight model.layers.1.mlp.experts.*.up_proj.weight_packed", message});
}

TEST(SyntheticPlan, ValidatorRefusesBadEntries) {
  for (SyntheticKind kind : {SyntheticKind::Normal, SyntheticKind::Int4Packed, SyntheticKind::Int4Scale}) {
    Plan p = synthetic_plan(kind);
    EXPECT_NO_THROW(validate_plan(p, "s.kplan")) << synthetic_kind_name(kind);
  }
  expect_refused([](Plan& p) { p.weights.back().owned = {1, 2, 3, 4}; }, "is synthetic but also holds bytes");
  expect_refused([](Plan& p) { p.weights.back().size = 4; }, "is synthetic with size 4");
  expect_refused([](Plan& p) { p.weights.back().dtype = DType::BF16; p.weights.back().size /= 2; }, "is synthetic int4_packed with dtype bf16 (i32)");
  expect_refused([](Plan& p) { p.weights.back().synthetic->group_size = 12; }, "group size 12");
  expect_refused([](Plan& p) { p.weights.back().synthetic->mean = 0.5f; }, "nonzero mean");
  expect_refused([](Plan& p) { p.weights.back().synthetic->stddev = -1.0f; }, "negative stddev");
  expect_refused([](Plan& p) { p.weights.back().synthetic->kind = static_cast<SyntheticKind>(9); }, "unknown synthetic kind 9");
  expect_refused([](Plan& p) { p.weights.back().synthetic->kernel = 0; }, "which is not of family synthetic_weights");
  expect_refused([](Plan& p) { p.weights.back().synthetic->kernel = 99; }, "names synthetic kernel 99 of");
  expect_refused([](Plan& p) { p.kernels.back().constants[0].value = 2; }, "which writes another kind, dtype or group");
  expect_refused([](Plan& p) { p.kernels.back().params.pop_back(); p.kernels.back().param_names.pop_back(); },
                 "whose parameters are not synthetic_weights'");
  // Normal: the exact double sum needs |mean| <= step * 2^28.
  expect_refused([](Plan& p) { p.weights.back().synthetic->mean = 1e6f; }, "mean too large for its stddev", SyntheticKind::Normal);
  expect_refused([](Plan& p) { p.weights.back().dtype = DType::I32; p.weights.back().size *= 2; }, "is synthetic normal with dtype i32",
                 SyntheticKind::Normal);
}

}  // namespace
}  // namespace kplan::plan
