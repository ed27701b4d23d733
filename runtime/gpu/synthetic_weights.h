#pragma once
// Synthetic weights on the device (`kplan compile --synthetic-weights SEED`): at load, the GPU
// model launches the plan's synthetic_weights kernel of each synthetic weight once, writing its
// values (ir/support/synthetic_values.h; the CPU reference computes the same on the host,
// runtime/cpu/synthetic_weights.h) where a real plan's bytes would have been uploaded.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/gpu/cuda_driver.h"
#include "schemas/plan_model.h"

namespace kplan::gpu {

// The launch of one synthetic weight: grid, block and the kernel's arguments
// (kernels_templates/synthetic_weights.cuh: out, n_lo, n_hi, key_lo, key_hi, mean, step).
struct SyntheticLaunch {
  uint32_t grid = 1, block = 1;
  CUdeviceptr out = 0;
  int32_t n_lo = 0, n_hi = 0, key_lo = 0, key_hi = 0;
  float mean = 0, step = 0;
};
// Pure (no driver; tests): the launch writing weight `w` at `out` on a device of `sm_count` SMs.
SyntheticLaunch synthetic_launch(const plan::Plan& plan, const plan::Weight& w, CUdeviceptr out, int sm_count);

// Launches every weight of `weights` (indices of synthetic weights with device storage at
// weights_base + offsets[i]) with functions[kernel] and waits for them. Returns the bytes
// written. Throws kplan::Error naming the weight the driver refused; `source` names the plan.
uint64_t generate_synthetic_weights(const CudaDriver& cu, const plan::Plan& plan, const std::vector<uint32_t>& weights,
                                    const std::vector<void*>& functions, CUdeviceptr weights_base,
                                    const std::vector<uint64_t>& offsets, int sm_count, const std::string& source);

}  // namespace kplan::gpu
