#pragma once
// The library calls of a plan (plan::Kernel::library): cuBLASLt's matmul for the dense matmuls of
// long steps (compiler/codegen/families/cublaslt_matmul.h says what the call computes and how
// its column-major operands map onto kplan's row-major ones). libcublasLt is loaded at run time
// with dlopen, like the driver (cuda_driver.h): nothing links against it, and only a plan that
// holds such calls needs it. Each launch gets its descriptors and cuBLASLt's heuristic's
// algorithm once, when the executor resolves its launches; running it enqueues cublasLtMatmul on
// the session's stream (recorded into the bucket's graph by stream capture like any launch).
#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

#include "schemas/plan_model.h"

namespace kplan::gpu {

class CublasLt;

// libcublasLt's entry points, loaded once per process; throws kplan::Error naming `what` (the plan
// and kernel that need it) when the library cannot be loaded.
const CublasLt& cublaslt(const std::string& what);

// A cuBLASLt handle, created in the current CUDA context (a session's: its device's primary
// context) and destroyed with it; throws kplan::Error naming `what` when cuBLASLt refuses one.
class LibraryHandle {
 public:
  LibraryHandle(const CublasLt& lt, const std::string& what);
  ~LibraryHandle();
  LibraryHandle(const LibraryHandle&) = delete;
  LibraryHandle& operator=(const LibraryHandle&) = delete;
  const CublasLt& lt() const { return lt_; }
  void* get() const { return handle_; }

 private:
  const CublasLt& lt_;
  void* handle_ = nullptr;
};

// Bytes of device workspace every call may use (one per session: its calls run in stream order).
inline constexpr uint64_t kLibraryWorkspaceBytes = 32ull << 20;

// One cublaslt_matmul launch, resolved for the device: operand addresses, descriptors, algorithm.
class LibraryMatmul {
 public:
  // `kernel` the plan kernel, `launch` its launch, `cells` its resolved arguments (launch_resolve.h:
  // one 8-byte cell an argument, pointers as device addresses), `workspace` kLibraryWorkspaceBytes of
  // device memory. Throws kplan::Error naming `what` when the constants or arguments are not a call
  // this runtime makes, or cuBLASLt has no algorithm for it.
  LibraryMatmul(const LibraryHandle& handle, const plan::Kernel& kernel, const plan::Launch& launch, const uint64_t* cells,
                CUdeviceptr workspace, const std::string& what);
  ~LibraryMatmul();
  LibraryMatmul(const LibraryMatmul&) = delete;
  LibraryMatmul& operator=(const LibraryMatmul&) = delete;

  // Enqueues the call on `stream`; the library's status as a CUresult-like failure text, empty on success.
  std::string run(CUstream stream) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kplan::gpu
