#include "runtime/gpu/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "ir/support/error.h"

namespace kplan::gpu {
namespace {

#define KPLAN_STRINGIFY2(x) #x
#define KPLAN_STRINGIFY(x) KPLAN_STRINGIFY2(x)

struct Loaded {
  CudaDriver driver;
  bool ok = false;
  std::string why;
};

Loaded load() {
  Loaded out;
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out.why = "no GPU: libcuda.so.1 not found (no NVIDIA driver installed)";
    return out;
  }
  std::string missing;
  // The stringified macro gives the versioned symbol cuda.h maps the name to.
#define KPLAN_CUDA_RESOLVE(name)                                                            \
  out.driver.name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, KPLAN_STRINGIFY(name))); \
  if (!out.driver.name) missing += std::string(missing.empty() ? "" : ", ") + KPLAN_STRINGIFY(name);
  KPLAN_CUDA_FUNCTIONS(KPLAN_CUDA_RESOLVE)
#undef KPLAN_CUDA_RESOLVE
  if (!missing.empty()) {
    out.why = "no GPU: the NVIDIA driver is too old (libcuda.so.1 lacks " + missing + ")";
    return out;
  }
  CUresult r = out.driver.cuInit(0);
  if (r != CUDA_SUCCESS) {
    out.why = "no GPU: cuInit failed: " + cuda_error_text(out.driver, r);
    return out;
  }
  int count = 0;
  r = out.driver.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    out.why = "no GPU: the driver reports no CUDA device";
    return out;
  }
  out.ok = true;
  return out;
}

}  // namespace

const CudaDriver* cuda_driver(std::string* why) {
  static Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.driver;
}

std::string cuda_error_text(const CudaDriver& cu, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cu.cuGetErrorName) cu.cuGetErrorName(r, &name);
  if (cu.cuGetErrorString) cu.cuGetErrorString(r, &text);
  std::string out = name ? name : ("CUresult " + std::to_string(static_cast<int>(r)));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

void cuda_check(const CudaDriver& cu, CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) throw Error(what + ": " + cuda_error_text(cu, r));
}

}  // namespace kplan::gpu
