// The toy plan the GPU tests run is itself sound without a GPU: NVRTC builds its kernel for both
// archs and the plan survives a write/read round trip with its cubins intact.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "compiler/codegen/nvrtc_compile.h"
#include "schemas/plan_reader.h"
#include "schemas/plan_writer.h"
#include "kplan/kplan.h"
#include "tests/unit/runtime/toy_plan.h"

namespace kplan {
namespace {

TEST(ToyPlan, BuildsForBothArchsAndRoundTrips) {
  plan::Plan p = testing::toy_plan({"sm_90", "sm_120"});
  for (const plan::KernelBinary& b : p.kernels[0].binaries)
    EXPECT_TRUE(codegen::cubin_has_entry(b.cubin, "toy_step")) << b.arch;
  std::filesystem::path file = std::filesystem::temp_directory_path() / ("kplan_toy_" + std::to_string(::getpid()) + ".kplan");
  plan::write_plan(p, file);
  plan::Plan back = plan::read_plan(file);
  EXPECT_EQ(back.kernels, p.kernels);
  EXPECT_EQ(back.buckets, p.buckets);
  kplan_plan* handle = nullptr;
  EXPECT_EQ(kplan_plan_open(file.c_str(), nullptr, &handle), KPLAN_STATUS_OK) << kplan_error_last();
  kplan_plan_close(handle);
  // Staging for the device check (tools/device/gpu_check.sh --stage): keep a copy of the plan,
  // written here on the CPU-only machine, for `kplan bench` there.
  if (const char* keep = std::getenv("KPLAN_TOY_PLAN_OUT")) std::filesystem::copy_file(file, keep, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace kplan
