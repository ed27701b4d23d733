#pragma once
// A CPU emulator of lowered launch sequences, for CI (no GPU). Each launch reads its arguments
// by name, gathers its operands from one host arena (and the plan's weights) through the strides
// and offsets it carries, computes with the runtime/cpu op (emulator_families.h) and scatters the
// result back; emulator_memory.h checks every access stays inside its slot or weight and that
// slot reuse never hands a launch clobbered data. Running a lowered plan through it and comparing
// with the CPU reference checks the lowering (strides, offsets, argument binding, slot reuse) end
// to end; gpu_ops_test.cc checks the CUDA templates against the same ops on the device.
#include <cstring>
#include <vector>

#include "emulator_families.h"
#include "emulator_memory.h"

namespace kplan::codegen::testing_util {

class LaunchEmulator {
 public:
  explicit LaunchEmulator(plan::LoweredPlan& lp) : lp_(lp), mem_(lp) {}

  uint8_t* slot(uint32_t index) { return mem_.slot(index); }
  uint8_t* step_input(plan::StepInputKind k) {
    for (const plan::StepInputBinding& b : lp_.step_inputs)
      if (b.kind == k) return slot(b.slot);
    throw Error("emulator: step input not bound");
  }
  template <typename T>
  void write_input(plan::StepInputKind k, const std::vector<T>& v) {
    std::memcpy(step_input(k), v.data(), v.size() * sizeof(T));
  }

  // One step: every launch of the bucket, over scratch that holds nothing from earlier steps.
  void run(const plan::Bucket& b) {
    mem_.begin_step();
    for (const plan::Launch& l : b.launches) run_launch(l);
  }
  // One launch (tests that step through a bucket).
  void run_launch(const plan::Launch& l) {
    LaunchArgs args(mem_, lp_, l);
    const auto& t = families::table();
    const auto it = t.find(args.kernel().family);
    if (it == t.end()) throw Error("emulator: no emulation of kernel family " + args.kernel().family);
    it->second(args);
  }
  const std::vector<uint8_t>& arena() const { return mem_.arena(); }

  // A step output as f32 (a bf16 output widened, as the GPU executor reads it).
  std::vector<float> output(const plan::StepOutput& o) {
    std::vector<float> v(o.rows * o.cols);
    const uint8_t* p = slot(o.slot) + o.offset;
    if (o.dtype == DType::BF16) {
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        v[i] = bf16_to_float(h);
      }
    } else {
      std::memcpy(v.data(), p, v.size() * 4);
    }
    return v;
  }

 private:
  plan::LoweredPlan& lp_;
  EmulatorMemory mem_;
};

}  // namespace kplan::codegen::testing_util
