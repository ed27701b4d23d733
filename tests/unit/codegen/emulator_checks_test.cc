// The launch emulator refuses launches that address memory wrongly: a stride running out of its
// slot, an offset into a weight past its end, and a launch reading a slot whose bytes hold two
// values (what a bad slot reuse or a shifted offset leaves), each named in the error.
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen_test_util.h"
#include "compiler/passes/lower_to_launches.h"
#include "compiler/driver/compile.h"
#include "launch_emulator.h"

namespace kplan::codegen {
namespace {

using testing_util::LaunchEmulator;
using testing_util::TempDir;

class EmulatorChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path ckpt = dir_.path() / "ckpt";
    const std::string cmd = std::string(KPLAN_BINARY) + " synth tiny --seed 1 --out " + ckpt.string() + " > /dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    kplan::CompileOptions c;
    c.model = ckpt;
    compiled_ = compile_to_ir(c);
    lower();
  }

  // The bucket of 4 tokens, lowered again (with the env the test set).
  void lower() {
    LowerOptions o;
    o.buckets = {4};
    o.max_context = 16;
    lp_ = lower_target(*compiled_.module->function("target"), compiled_.target->weights(), o);
  }

  // The first (or last) launch of `family` in the bucket, and the position of its argument `name`.
  std::pair<plan::Launch*, size_t> find(const std::string& family, const std::string& name, bool last = false) {
    std::vector<plan::Launch>& ls = lp_.buckets.at(0).launches;
    for (size_t n = 0; n < ls.size(); ++n) {
      plan::Launch& l = ls[last ? ls.size() - 1 - n : n];
      const KernelSource& k = lp_.kernels.at(l.kernel);
      if (k.family != family) continue;
      for (size_t i = 0; i < k.signature.size(); ++i)
        if (k.signature[i].name == name) return {&l, i};
    }
    ADD_FAILURE() << "no " << family << " launch with argument " << name;
    return {nullptr, 0};
  }

  // Runs the bucket (4 tokens at cache length 0); returns the emulator's error, "" when none.
  std::string run() {
    LaunchEmulator emu(lp_);
    emu.write_input(plan::StepInputKind::Tokens, std::vector<int32_t>{5, 17, 3, 42});
    emu.write_input(plan::StepInputKind::Positions, std::vector<int32_t>{0, 1, 2, 3});
    emu.write_input(plan::StepInputKind::TreeMask, std::vector<uint32_t>{1, 3, 7, 15});
    emu.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{0});
    emu.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{4});
    try {
      emu.run(lp_.buckets.at(0));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  TempDir dir_;
  CompileResult compiled_;
  plan::LoweredPlan lp_;
};

TEST_F(EmulatorChecks, TheUntouchedPlanRuns) { EXPECT_EQ(run(), ""); }

TEST_F(EmulatorChecks, AStrideRunningOutOfItsSlotFails) {
  auto [l, i] = find("matmul_siblings", "x_row_stride");
  ASSERT_NE(l, nullptr);
  l->args[i].ival *= 64;
  const std::string err = run();
  EXPECT_NE(err.find("argument x"), std::string::npos) << err;
  EXPECT_NE(err.find("outside its slot"), std::string::npos) << err;
}

// The first layer norm's launch: its weight read past the end.
TEST_F(EmulatorChecks, AnOffsetPastTheEndOfAWeightFails) {
  auto [l, i] = find("rms_norm", "weight");
  ASSERT_NE(l, nullptr);
  ASSERT_EQ(l->args[i].kind, plan::ArgKind::Weight);
  l->args[i].offset += lp_.weights.at(l->args[i].index).data().size() - 2;
  const std::string err = run();
  EXPECT_NE(err.find("outside its weight"), std::string::npos) << err;
}

// The final norm writes one row fewer than lm_head reads: lm_head's last row is what an earlier
// value left in the reused slot, so one argument reads bytes of two values. (A plan without the
// norm fusion, the default: with it lm_head's launch computes the final norm.)
TEST_F(EmulatorChecks, AReaderOfStaleBytesInAReusedSlotFails) {
  auto [l, i] = find("rms_norm", "n_rows", /*last=*/true);
  ASSERT_NE(l, nullptr);
  l->args[i].ival -= 1;
  const std::string err = run();
  EXPECT_NE(err.find("two different values"), std::string::npos) << err;
}

// The gather (in the first norm's launch, embedding_norm.h) writes one row fewer than its readers
// read: they read bytes no launch wrote.
TEST_F(EmulatorChecks, AReaderOfBytesNothingWroteFails) {
  auto [l, i] = find("embedding_norm", "n_tokens");
  ASSERT_NE(l, nullptr);
  l->args[i].ival -= 1;
  const std::string err = run();
  EXPECT_NE(err.find("no launch of this step wrote"), std::string::npos) << err;
}

}  // namespace
}  // namespace kplan::codegen
