#include "runtime/gpu/launch_resolve.h"

#include <cstring>

#include "ir/support/error.h"

namespace kplan::gpu {

uint32_t sm_count_grid(uint32_t per_sm, int sm_count, uint32_t cluster_x) {
  const uint64_t blocks = uint64_t{per_sm} * static_cast<uint64_t>(sm_count > 0 ? sm_count : 0);
  const uint64_t c = cluster_x ? cluster_x : 1;
  return static_cast<uint32_t>(std::max<uint64_t>(blocks / c * c, c));
}

CUtensorMapDataType tensor_map_dtype(DType t) {
  switch (t) {
    case DType::F32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::F16: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::I32: return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case DType::U8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    default: break;
  }
  throw Error("tensor map: dtype " + std::string(dtype_name(t)) + " is not one TMA moves");
}

CUtensorMapSwizzle tensor_map_swizzle(plan::TensorMapSwizzle s) {
  switch (s) {
    case plan::TensorMapSwizzle::None: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case plan::TensorMapSwizzle::B32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case plan::TensorMapSwizzle::B64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case plan::TensorMapSwizzle::B128: return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

namespace {

CUdeviceptr base_address(const plan::Plan& p, plan::ArgKind kind, uint32_t index, const DeviceAddresses& at) {
  switch (kind) {
    case plan::ArgKind::Buffer: return at.arena + p.buffers.slots.at(index).offset;
    case plan::ArgKind::Weight: return at.weights + at.weight_offsets->at(index);
    case plan::ArgKind::StepInput: {
      const plan::StepInputBinding* s = p.step_input(static_cast<plan::StepInputKind>(index));
      if (!s) throw Error("a launch reads a step input the plan does not bind");
      return at.arena + p.buffers.slots.at(s->slot).offset;
    }
    default: break;
  }
  throw Error("internal: not a pointer argument");
}

CUtensorMap encode(const CudaDriver& cu, const plan::Plan& p, const plan::TensorMapDesc& t, const DeviceAddresses& at,
                   const std::string& what) {
  const CUdeviceptr base = base_address(p, t.base, t.index, at) + t.offset;
  const cuuint32_t rank = static_cast<cuuint32_t>(t.dims.size());
  std::vector<cuuint64_t> dims(t.dims.begin(), t.dims.end()), strides(t.strides.begin(), t.strides.end());
  std::vector<cuuint32_t> box(t.box.begin(), t.box.end()), element_strides(rank, 1);
  CUtensorMap map;
  std::memset(&map, 0, sizeof map);
  const CUresult r = cu.cuTensorMapEncodeTiled(
      &map, tensor_map_dtype(t.dtype), rank, reinterpret_cast<void*>(base), dims.data(), strides.data(), box.data(),
      element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(t.swizzle),
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  cuda_check(cu, r, what + ": cuTensorMapEncodeTiled");
  return map;
}

}  // namespace

ResolvedLaunch resolve_launch(const CudaDriver& cu, const plan::Plan& p, const plan::Launch& l, const DeviceAddresses& at,
                              const std::string& what) {
  ResolvedLaunch out;
  out.grid = l.grid;
  out.block = l.block;
  out.cluster = l.cluster;
  out.smem_bytes = l.smem_bytes;
  if (l.grid_x_per_sm > 0) {
    if (at.sm_count <= 0) throw Error(what + ": the launch sizes its grid by the SM count, which is unknown");
    out.grid[0] = sm_count_grid(l.grid_x_per_sm, at.sm_count, l.cluster[0]);
  }
  for (const plan::TensorMapDesc& t : l.tensor_maps) out.tensor_maps.push_back(encode(cu, p, t, at, what));
  out.cells.assign(l.args.size(), 0);
  for (size_t a = 0; a < l.args.size(); ++a) {
    const plan::LaunchArg& arg = l.args[a];
    uint64_t& cell = out.cells[a];
    switch (arg.kind) {
      case plan::ArgKind::Buffer:
      case plan::ArgKind::Weight:
      case plan::ArgKind::StepInput: cell = base_address(p, arg.kind, arg.index, at) + arg.offset; break;
      case plan::ArgKind::I32: {
        const int32_t v = static_cast<int32_t>(arg.ival);
        std::memcpy(&cell, &v, 4);
        break;
      }
      case plan::ArgKind::I64: std::memcpy(&cell, &arg.ival, 8); break;
      case plan::ArgKind::F32: std::memcpy(&cell, &arg.fval, 4); break;
      case plan::ArgKind::TensorMap: break;  // passed from tensor_maps below
    }
  }
  for (size_t a = 0; a < l.args.size(); ++a) {
    const plan::LaunchArg& arg = l.args[a];
    out.params.push_back(arg.kind == plan::ArgKind::TensorMap ? static_cast<void*>(&out.tensor_maps.at(arg.index))
                                                              : static_cast<void*>(&out.cells[a]));
  }
  return out;
}

CUresult launch_resolved(const CudaDriver& cu, CUfunction fn, const ResolvedLaunch& l, CUstream stream, bool pdl) {
  void** params = l.params.empty() ? nullptr : const_cast<void**>(l.params.data());
  if (!l.has_cluster() && !pdl) {
    return cu.cuLaunchKernel(fn, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem_bytes,
                             stream, params, nullptr);
  }
  CUlaunchAttribute attrs[2];
  std::memset(attrs, 0, sizeof attrs);
  unsigned n = 0;
  if (l.has_cluster()) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = l.cluster[0];
    attrs[n].value.clusterDim.y = l.cluster[1];
    attrs[n].value.clusterDim.z = l.cluster[2];
    ++n;
  }
  if (pdl) {  // the kernel may start as its predecessor ends (kp::grid_dependency_begin waits)
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  CUlaunchConfig config;
  std::memset(&config, 0, sizeof config);
  config.gridDimX = l.grid[0];
  config.gridDimY = l.grid[1];
  config.gridDimZ = l.grid[2];
  config.blockDimX = l.block[0];
  config.blockDimY = l.block[1];
  config.blockDimZ = l.block[2];
  config.sharedMemBytes = l.smem_bytes;
  config.hStream = stream;
  config.attrs = attrs;
  config.numAttrs = n;
  return cu.cuLaunchKernelEx(&config, fn, params, nullptr);
}

}  // namespace kplan::gpu
