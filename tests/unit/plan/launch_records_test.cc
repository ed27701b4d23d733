// What Hopper / Blackwell launches add to a launch record: cluster dims, grids sized by the
// device's SM count, TMA tensor-map arguments. Write -> read round trips, the validator's
// refusals, and the load-time resolution rules (runtime/gpu/launch_resolve.h) that need no GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "ir/support/error.h"
#include "runtime/gpu/launch_resolve.h"
#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "tests/unit/plan/sample_plan.h"

namespace kplan::plan {
namespace {

// The sample plan plus a persistent, clustered kernel that reads weight 2 through a tensor map.
Plan hopper_plan() {
  Plan p = testing::sample_plan();
  Kernel k = p.kernels[0];
  k.id = "tma_gemm_test";
  k.entry = "kplan_tma_gemm_test";
  k.family = "tma_gemm";
  k.params = {ParamType::TensorMap, ParamType::Pointer, ParamType::I32};
  k.param_names = {"w_map", "y", "n"};
  p.kernels.push_back(k);
  Launch l;
  l.kernel = 2;
  l.grid = {0, 2, 1};  // grid.x: 2 blocks per SM, at load
  l.grid_x_per_sm = 2;
  l.block = {128, 1, 1};
  l.cluster = {2, 1, 1};
  l.smem_bytes = 64 * 1024;
  TensorMapDesc t;
  t.base = ArgKind::Weight;
  t.index = 2;  // i32 [4, 1100]
  t.offset = 0;
  t.dtype = DType::I32;
  t.dims = {1100, 4};
  t.strides = {1100 * 4};
  t.box = {32, 4};  // 128-byte rows
  t.swizzle = TensorMapSwizzle::B128;
  l.tensor_maps = {t};
  l.args = {{ArgKind::TensorMap, 0, 0, 0, 0}, LaunchArg::buffer(5), LaunchArg::i32(4)};
  l.note = "tma";
  p.buckets[0].launches.push_back(l);
  return p;
}

std::string validate_error(const Plan& p) {
  try {
    validate_plan(p, "m.kplan");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<uint8_t> bytes_of(const std::filesystem::path& f) {
  std::ifstream in(f, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(PlanLaunchRecords, ClusterSmGridAndTensorMapsRoundTrip) {
  Plan p = hopper_plan();
  ASSERT_EQ(validate_error(p), "");
  const auto path = testing::scratch_dir("kplan_launch_records") / "hopper.kplan";
  write_plan(p, path);
  const Plan back = read_plan(path);
  ASSERT_EQ(back.buckets.size(), p.buckets.size());
  EXPECT_EQ(back.buckets, p.buckets);
  const Launch& l = back.buckets[0].launches.back();
  EXPECT_EQ(l.cluster, (std::array<uint32_t, 3>{2, 1, 1}));
  EXPECT_EQ(l.grid_x_per_sm, 2u);
  ASSERT_EQ(l.tensor_maps.size(), 1u);
  EXPECT_EQ(l.tensor_maps[0].dims, (std::vector<uint64_t>{1100, 4}));
  EXPECT_EQ(l.tensor_maps[0].swizzle, TensorMapSwizzle::B128);
  EXPECT_EQ(back.kernels[2].params[0], ParamType::TensorMap);
  // Deterministic: the same plan writes the same bytes.
  const auto again = path.parent_path() / "again.kplan";
  write_plan(p, again);
  EXPECT_EQ(bytes_of(path), bytes_of(again));
}

TEST(PlanLaunchRecords, PlainLaunchesReadBackWithoutClustersOrMaps) {
  Plan p = testing::sample_plan();
  const auto path = testing::scratch_dir("kplan_launch_records") / "plain.kplan";
  write_plan(p, path);
  const Plan back = read_plan(path);
  for (const Launch& l : back.buckets[0].launches) {
    EXPECT_EQ(l.cluster, (std::array<uint32_t, 3>{1, 1, 1}));
    EXPECT_EQ(l.grid_x_per_sm, 0u);
    EXPECT_TRUE(l.tensor_maps.empty());
  }
}

TEST(PlanLaunchRecords, ValidatorRefusesBadClustersAndGrids) {
  auto with = [](auto edit) {
    Plan p = hopper_plan();
    edit(p.buckets[0].launches.back());
    return validate_error(p);
  };
  EXPECT_NE(with([](Launch& l) { l.cluster = {0, 1, 1}; }).find("zero cluster dim"), std::string::npos);
  EXPECT_NE(with([](Launch& l) { l.cluster = {4, 2, 2}; l.grid = {0, 2, 2}; }).find("clusters of 16 blocks (at most 8)"),
            std::string::npos);
  EXPECT_NE(with([](Launch& l) { l.cluster = {1, 3, 1}; }).find("grid dim 1 (2) is not a multiple of its cluster's (3)"),
            std::string::npos);
  EXPECT_NE(with([](Launch& l) { l.grid[0] = 8; }).find("sizes its grid by the SM count but also gives grid.x = 8"),
            std::string::npos);
  EXPECT_NE(with([](Launch& l) { l.grid_x_per_sm = 0; }).find("empty grid"), std::string::npos);
}

TEST(PlanLaunchRecords, ValidatorRefusesBadTensorMaps) {
  auto with = [](auto edit) {
    Plan p = hopper_plan();
    edit(p.buckets[0].launches.back());
    return validate_error(p);
  };
  auto map = [](Launch& l) -> TensorMapDesc& { return l.tensor_maps[0]; };
  EXPECT_NE(with([&](Launch& l) { l.tensor_maps.clear(); }).find("argument 0 names a missing tensor map"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { l.args[0] = LaunchArg::buffer(5); }).find("is a buffer for a tensor_map parameter"),
            std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).index = 9; }).find("tensor map 0 names a missing weight"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).base = ArgKind::I32; }).find("has a i32 base"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).offset = 8; }).find("offset 8 is not 16-byte aligned"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).dtype = DType::BOOL; }).find("is not one TMA moves"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).strides = {4404}; }).find("stride 0 = 4404"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).strides = {}; }).find("0 strides for rank 2"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).box = {300, 4}; }).find("box dim 0 = 300 (1..256)"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).box = {3, 4}; }).find("box row of 12 bytes is not a multiple of 16"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).box = {64, 4}; }).find("exceeds the 128B swizzle span"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).dims = {1100, 5}; }).find("reaches 22000 bytes into a base of 17600"), std::string::npos);
  EXPECT_NE(with([&](Launch& l) { map(l).dims = {1, 1, 1, 1, 1, 1}; }).find("rank 6 (1..5)"), std::string::npos);
}

TEST(PlanLaunchRecords, LoadTimeResolutionRules) {
  // H200: 132 SMs; RTX PRO 6000: 188. Rounded down to whole clusters, never below one.
  EXPECT_EQ(gpu::sm_count_grid(2, 132, 1), 264u);
  EXPECT_EQ(gpu::sm_count_grid(1, 188, 8), 184u);
  EXPECT_EQ(gpu::sm_count_grid(1, 3, 4), 4u);
  EXPECT_EQ(gpu::tensor_map_dtype(DType::BF16), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(gpu::tensor_map_swizzle(TensorMapSwizzle::B64), CU_TENSOR_MAP_SWIZZLE_64B);
  EXPECT_THROW(gpu::tensor_map_dtype(DType::I64), Error);
}

}  // namespace
}  // namespace kplan::plan
