#pragma once
// Runs one bucket of a lowered plan on the GPU through the real kernels: the host image of the
// arena (step inputs and KV rows written by the emulator's memory) is uploaded, weights uploaded,
// each kernel compiled by NVRTC for this GPU's arch (a library call made as the runtime makes it:
// runtime/gpu/library_matmul.h), every launch issued as recorded, and the arena read back. Absent
// where there is no GPU (CI): available() says why.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/codegen/compile_kernels.h"
#include "compiler/passes/lowered_plan.h"
#include "compiler/plan/plan_assemble.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/library_matmul.h"

namespace kplan::ops_test {

class GpuRunner {
 public:
  // The process-wide runner; nullptr (and `why`) without a GPU.
  static GpuRunner* get(std::string* why) {
    static std::string reason;
    static GpuRunner* runner = [] () -> GpuRunner* {
      const gpu::CudaDriver* cu = gpu::cuda_driver(&reason);
      if (!cu) return nullptr;
      int count = 0;
      if (cu->cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
        reason = "no GPU: no CUDA device";
        return nullptr;
      }
      return new GpuRunner(*cu);  // lives as long as the test process
    }();
    if (why) *why = reason;
    return runner;
  }

  // Runs `bucket` over `arena` (the host image, arena_size bytes) and returns the arena after.
  std::vector<uint8_t> run(const plan::LoweredPlan& lp, const plan::Bucket& bucket, const std::vector<uint8_t>& arena) {
    std::vector<CUdeviceptr> owned;
    auto upload = [&](const void* data, size_t bytes) {
      CUdeviceptr p = 0;
      check(cu_.cuMemAlloc(&p, std::max<size_t>(bytes, 4)), "cuMemAlloc");
      if (bytes) check(cu_.cuMemcpyHtoD(p, data, bytes), "cuMemcpyHtoD");
      owned.push_back(p);
      return p;
    };
    const CUdeviceptr base = upload(arena.data(), arena.size());
    std::vector<CUdeviceptr> weights;
    for (const plan::Weight& w : lp.weights) weights.push_back(upload(w.data().data(), w.data().size()));
    auto slot_address = [&](uint32_t s) { return base + lp.buffers.slots.at(s).offset; };
    for (const plan::Launch& l : bucket.launches) {
      std::vector<uint64_t> storage(l.args.size());
      std::vector<void*> params;
      for (size_t a = 0; a < l.args.size(); ++a) {
        const plan::LaunchArg& arg = l.args[a];
        switch (arg.kind) {
          case plan::ArgKind::I32: { const int32_t v = static_cast<int32_t>(arg.ival); std::memcpy(&storage[a], &v, 4); break; }
          case plan::ArgKind::I64: storage[a] = static_cast<uint64_t>(arg.ival); break;
          case plan::ArgKind::F32: std::memcpy(&storage[a], &arg.fval, 4); break;
          case plan::ArgKind::Buffer: storage[a] = slot_address(arg.index) + arg.offset; break;
          case plan::ArgKind::Weight: storage[a] = weights.at(arg.index) + arg.offset; break;
          case plan::ArgKind::StepInput:
            for (const plan::StepInputBinding& b : lp.step_inputs)
              if (static_cast<uint32_t>(b.kind) == arg.index) storage[a] = slot_address(b.slot);
            break;
          case plan::ArgKind::TensorMap:  // no family emits one yet; runtime/gpu/launch_resolve encodes them
            throw Error("ops test: launch " + l.note + " takes a tensor map, which this runner does not encode");
        }
        params.push_back(&storage[a]);
      }
      const codegen::KernelSource& k = lp.kernels.at(l.kernel);
      if (!k.library.empty()) {
        if (!library_) library_ = std::make_unique<gpu::LibraryHandle>(gpu::cublaslt(k.id), k.id);
        const gpu::LibraryMatmul call(*library_, plan::kernel_record(k), l, storage.data(), workspace(), k.id);
        const std::string failed = call.run(nullptr);
        if (!failed.empty()) throw Error(k.id + ": " + failed);
        check(cu_.cuCtxSynchronize(), l.note);
        continue;
      }
      const CUfunction f = function(k);
      // Opted in to its dynamic shared memory as runtime/gpu/gpu_model.cc does (static shared
      // memory counts against the 48 KiB default too).
      if (uint32_t& opted = smem_opted_in_[k.id]; l.smem_bytes > opted) {
        check(cu_.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(l.smem_bytes)),
              k.id + ": " + std::to_string(l.smem_bytes) + " bytes of shared memory");
        opted = l.smem_bytes;
      }
      check(cu_.cuLaunchKernel(f, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem_bytes,
                               nullptr, params.data(), nullptr),
            "launch " + k.id);
      check(cu_.cuCtxSynchronize(), l.note);
    }
    std::vector<uint8_t> out(arena.size());
    check(cu_.cuMemcpyDtoH(out.data(), base, out.size()), "cuMemcpyDtoH");
    for (CUdeviceptr p : owned) cu_.cuMemFree(p);
    return out;
  }

 private:
  explicit GpuRunner(const gpu::CudaDriver& cu) : cu_(cu) {
    CUdevice dev;
    check(cu_.cuDeviceGet(&dev, 0), "cuDeviceGet");
    int major = 0, minor = 0;
    cu_.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cu_.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    CUcontext ctx;
    check(cu_.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cu_.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  }
  void check(CUresult r, const std::string& what) const { gpu::cuda_check(cu_, r, what); }

  CUdeviceptr workspace() {
    if (!workspace_) check(cu_.cuMemAlloc(&workspace_, gpu::kLibraryWorkspaceBytes), "the cuBLASLt workspace");
    return workspace_;
  }

  CUfunction function(const codegen::KernelSource& k) {
    auto it = functions_.find(k.id);
    if (it != functions_.end()) return it->second;
    codegen::CompileOptions o;
    o.archs = {arch_};
    o.progress = [](const std::string&) {};
    const std::vector<codegen::KernelInstance> inst = codegen::compile_kernels({k}, o);
    CUmodule module;
    check(cu_.cuModuleLoadData(&module, inst.at(0).cubin.data()), "load " + k.id);
    CUfunction f;
    check(cu_.cuModuleGetFunction(&f, module, k.entry.c_str()), "entry " + k.entry);
    return functions_[k.id] = f;
  }

  const gpu::CudaDriver& cu_;
  std::string arch_;
  std::map<std::string, CUfunction> functions_;
  std::map<std::string, uint32_t> smem_opted_in_;  // dynamic shared memory each instance may use
  CUdeviceptr workspace_ = 0;                        // library calls' (allocated on first use)
  std::unique_ptr<gpu::LibraryHandle> library_;      // and their cuBLASLt handle
};

}  // namespace kplan::ops_test
