// Kernel families: typed Args generate both the entry signature and the launch arguments, every
// family has a heuristics entry per arch, geometry can ask for clusters and SM-count grids.
#include <gtest/gtest.h>

#include <set>

#include "compiler/codegen/families/all.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/codegen/instantiate.h"
#include "compiler/codegen/launch_geometry.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using plan::LaunchArg;

// A swapped, missing or mistyped argument does not compile (checked here, at compile time).
template <class A>
concept InOrder = requires { A{.x = LaunchArg::buffer(0), .y = LaunchArg::buffer(1), .n_rows = 1, .x_stride = 2, .y_stride = 3}; };
template <class A>
concept Swapped = requires { A{.y = LaunchArg::buffer(1), .x = LaunchArg::buffer(0), .n_rows = 1, .x_stride = 2, .y_stride = 3}; };
template <class A>
concept Missing = requires { A{.x = LaunchArg::buffer(0), .y = LaunchArg::buffer(1), .n_rows = 1, .x_stride = 2}; };
template <class A>
concept IntForPointer = requires { A{.x = 7, .y = LaunchArg::buffer(1), .n_rows = 1, .x_stride = 2, .y_stride = 3}; };
template <class A>
concept FloatForInt = requires { A{.x = LaunchArg::buffer(0), .y = LaunchArg::buffer(1), .n_rows = 1.5, .x_stride = 2, .y_stride = 3}; };
static_assert(InOrder<copy_rows::Args>);
static_assert(!Swapped<copy_rows::Args>);
static_assert(!Missing<copy_rows::Args>);
static_assert(!IntForPointer<copy_rows::Args>);
static_assert(!FloatForInt<copy_rows::Args>);

TEST(CodegenFamilies, ArgsGenerateSignatureAndLaunchArguments) {
  const std::vector<KernelArg> sig = signature_of<rms_norm::Args>();
  ASSERT_EQ(sig.size(), 7u);
  const char* names[] = {"x", "weight", "y", "n_rows", "x_stride", "y_stride", "eps"};
  for (size_t i = 0; i < sig.size(); ++i) EXPECT_EQ(sig[i].name, names[i]);
  EXPECT_EQ(sig[0].kind, ArgKind::DevicePtr);
  EXPECT_EQ(sig[3].kind, ArgKind::I32);
  EXPECT_EQ(sig[6].kind, ArgKind::F32);
  const rms_norm::Args a{.x = LaunchArg::buffer(3, 16), .weight = LaunchArg::weight(2), .y = LaunchArg::buffer(4), .n_rows = 5,
                         .x_stride = 80, .y_stride = 64, .eps = 1e-6};
  const std::vector<LaunchArg> args = launch_args(a);
  ASSERT_EQ(args.size(), 7u);
  EXPECT_EQ(args[0], LaunchArg::buffer(3, 16));
  EXPECT_EQ(args[1], LaunchArg::weight(2));
  EXPECT_EQ(args[4], LaunchArg::i32(80));
  EXPECT_EQ(args[5], LaunchArg::i32(64));
  EXPECT_FLOAT_EQ(args[6].fval, 1e-6f);
  // The generated entry's parameter list is the same list.
  const KernelSource k = rms_norm_kernel(64, ElemType::F32, ElemType::F32);
  EXPECT_NE(k.source.find("(void* x, void* weight, void* y, int n_rows, int x_stride, int y_stride, float eps)"), std::string::npos);
}

// A Hopper family's arguments may be TMA tensor maps: described here, encoded by the runtime.
struct TmaArgs {
  KPLAN_TMAP(a_map);
  KPLAN_PTR(y);
  KPLAN_TMAP(b_map);
  KPLAN_I32(n);
};

TEST(CodegenFamilies, TensorMapArgumentsTravelWithTheLaunch) {
  const std::vector<KernelArg> sig = signature_of<TmaArgs>();
  ASSERT_EQ(sig.size(), 4u);
  EXPECT_EQ(sig[0], (KernelArg{"a_map", ArgKind::TensorMap}));
  EXPECT_EQ(sig[2], (KernelArg{"b_map", ArgKind::TensorMap}));
  plan::TensorMapDesc a, b;
  a.base = plan::ArgKind::Weight;
  a.index = 3;
  a.dims = {256, 64};
  a.strides = {512};
  a.box = {64, 16};
  b = a;
  b.index = 4;
  const LaunchArgs args = launch_arguments(TmaArgs{.a_map = a, .y = LaunchArg::buffer(2), .b_map = b, .n = 7});
  ASSERT_EQ(args.args.size(), 4u);
  EXPECT_EQ(args.args[0].kind, plan::ArgKind::TensorMap);
  EXPECT_EQ(args.args[0].index, 0u);
  EXPECT_EQ(args.args[2].kind, plan::ArgKind::TensorMap);
  EXPECT_EQ(args.args[2].index, 1u);
  ASSERT_EQ(args.tensor_maps.size(), 2u);
  EXPECT_EQ(args.tensor_maps[1], b);
  EXPECT_STREQ(arg_kind_name(ArgKind::TensorMap), "tensor_map");
}

TEST(CodegenFamilies, ScalarsOutOfRangeAndPointersFromScalarsAreRefused) {
  EXPECT_THROW((I32Arg<"n">(int64_t{1} << 40)), Error);
  EXPECT_THROW((PtrArg<"p">(LaunchArg::i32(3))), Error);
}

TEST(CodegenFamilies, EveryFamilyHasHeuristicsForEveryArch) {
  for (const char* arch : {"sm_90", "sm_90a", "sm_120"}) {
    for (const Family* f : all_families()) EXPECT_TRUE(tuning_for(arch).count(f->name)) << arch << " " << f->name;
  }
  EXPECT_EQ(&tuning_for("sm_120"), &sm120_tuning());
  EXPECT_EQ(&tuning_for("sm_90"), &sm90_tuning());
  EXPECT_THROW(tuning_for("hopper"), Error);
  // The arch reaches the instance (same values today: nothing measured differs on sm_120).
  EXPECT_EQ(matmul_kernel(64, 64, ElemType::F32, ElemType::F32, false, false, "sm_120").id,
            matmul_kernel(64, 64, ElemType::F32, ElemType::F32).id);
}

TEST(CodegenFamilies, EverySignatureIsItsArgsStruct) {
  // The registry's signature is what the family's Args generates, and names are unique.
  for (const Family* f : all_families()) {
    ASSERT_FALSE(f->signature.empty()) << f->name;
    std::set<std::string> names;
    for (const KernelArg& a : f->signature) EXPECT_TRUE(names.insert(a.name).second) << f->name << " " << a.name;
    EXPECT_NE(f->geometry, nullptr) << f->name;
    EXPECT_EQ(&find_family(f->name), f);
  }
  EXPECT_EQ(find_family("moe_grouped_down").signature, signature_of<moe_grouped_down::Args>());
  EXPECT_EQ(find_family("rope").signature.size(), 13u);
}

}  // namespace
}  // namespace kplan::codegen
