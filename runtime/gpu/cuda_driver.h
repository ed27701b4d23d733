#pragma once
// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"): nothing links against
// libcuda, so kplan builds and runs (on the CPU) where no driver is installed. Only the entry
// points the runtime uses are resolved; the symbol names follow cuda.h's versioning macros
// (cuMemAlloc -> cuMemAlloc_v2, ...), so they always match the types from the header.
#include <cuda.h>

#include <string>

namespace kplan::gpu {

struct CudaDriver {
#define KPLAN_CUDA_FUNCTIONS(X)                                                                \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)        \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                      \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuMemAlloc)            \
  X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)       \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8Async) X(cuMemGetInfo) X(cuMemHostAlloc) X(cuMemFreeHost)   \
  X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncSetAttribute)           \
  X(cuLaunchKernel) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                \
  X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)         \
  X(cuGraphDestroy) X(cuGraphExecDestroy) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)  \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName) X(cuGetErrorString) \
  X(cuLaunchKernelEx) X(cuTensorMapEncodeTiled) X(cuFuncGetAttribute)                           \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)
#define KPLAN_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
  KPLAN_CUDA_FUNCTIONS(KPLAN_CUDA_MEMBER)
#undef KPLAN_CUDA_MEMBER
};

// The driver, loaded and initialised once (cuInit) per process; nullptr when there is none, with
// `why` set to one line such as "no GPU: libcuda.so.1 not found (no NVIDIA driver installed)".
const CudaDriver* cuda_driver(std::string* why);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
std::string cuda_error_text(const CudaDriver& cu, CUresult r);

// Throws kplan::Error("<what>: <error text>") unless r is CUDA_SUCCESS.
void cuda_check(const CudaDriver& cu, CUresult r, const std::string& what);

}  // namespace kplan::gpu
