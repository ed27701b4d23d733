#pragma once
// What the GPU executor resolves per launch once it knows the device and the device addresses
// of the arena and the weights: pointer arguments become addresses, TMA tensor maps are encoded
// (cuTensorMapEncodeTiled), an SM-count grid gets this device's SM count, and a launch with
// cluster dims goes through cuLaunchKernelEx. The plan stays device-free data (plan_model.h).
#include <cuda.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/gpu/cuda_driver.h"
#include "schemas/plan_model.h"

namespace kplan::gpu {

// Device addresses a plan's arguments resolve against.
struct DeviceAddresses {
  CUdeviceptr arena = 0;                      // BufferPlan offsets are relative to it
  CUdeviceptr weights = 0;                    // weight i at weights + weight_offsets[i]
  const std::vector<uint64_t>* weight_offsets = nullptr;
  int sm_count = 0;                           // the device's multiprocessors
};

// One launch, ready for cuLaunchKernel(Ex). Movable: `params` points into heap storage that
// moves with it.
struct ResolvedLaunch {
  std::array<uint32_t, 3> grid{1, 1, 1}, block{1, 1, 1}, cluster{1, 1, 1};
  uint32_t smem_bytes = 0;
  std::vector<uint64_t> cells;          // one 8-byte cell per scalar / pointer argument
  std::vector<CUtensorMap> tensor_maps;  // 64-byte aligned, 128 bytes each, passed by value
  std::vector<void*> params;            // what the kernel's parameters read, in order
  bool has_cluster() const { return cluster != std::array<uint32_t, 3>{1, 1, 1}; }
};

// Throws kplan::Error naming the launch (`what`) when an SM-count grid meets sm_count 0, or the
// driver refuses a tensor map.
ResolvedLaunch resolve_launch(const CudaDriver& cu, const plan::Plan& plan, const plan::Launch& launch,
                              const DeviceAddresses& at, const std::string& what);

// cuLaunchKernelEx with the cluster attribute when the launch has cluster dims and the
// programmatic-serialization one with `pdl` (programmatic dependent launch: the kernel is
// scheduled while its predecessor finishes), else cuLaunchKernel. Graph capture records either.
CUresult launch_resolved(const CudaDriver& cu, CUfunction fn, const ResolvedLaunch& l, CUstream stream, bool pdl = false);

// Pure helpers (no driver), shared with tests.
// grid.x of an SM-count grid: per_sm * sm_count rounded down to a multiple of cluster_x (>= cluster_x).
uint32_t sm_count_grid(uint32_t per_sm, int sm_count, uint32_t cluster_x);
CUtensorMapDataType tensor_map_dtype(DType t);
CUtensorMapSwizzle tensor_map_swizzle(plan::TensorMapSwizzle s);

}  // namespace kplan::gpu
