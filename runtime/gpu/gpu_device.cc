#include "runtime/gpu/gpu_device.h"

#include "ir/support/error.h"
#include "runtime/gpu/cuda_driver.h"
#include "schemas/plan_arch.h"

namespace kplan::gpu {

bool probe_device(DeviceInfo* info, std::string* why) {
  const CudaDriver* cu = cuda_driver(why);
  if (!cu) return false;
  CUdevice dev = 0;
  CUresult r = cu->cuDeviceGet(&dev, 0);
  if (r != CUDA_SUCCESS) {
    if (why) *why = "no GPU: cuDeviceGet failed: " + cuda_error_text(*cu, r);
    return false;
  }
  char name[256] = {};
  cu->cuDeviceGetName(name, sizeof name - 1, dev);
  int major = 0, minor = 0, sms = 0;
  cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cu->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  cu->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  size_t mem = 0;
  cu->cuDeviceTotalMem(&mem, dev);
  int version = 0;
  cu->cuDriverGetVersion(&version);
  info->name = name;
  info->arch = plan::arch_name(major, minor);
  info->sm_count = sms;
  info->memory_bytes = mem;
  info->driver_version = version;
  return true;
}

void device_memory(uint64_t* free_bytes, uint64_t* total_bytes) {
  std::string why;
  const CudaDriver* cu = cuda_driver(&why);
  if (!cu) throw Error(why);
  CUdevice dev = 0;
  cuda_check(*cu, cu->cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx = nullptr;
  cuda_check(*cu, cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cannot create a CUDA context");
  size_t f = 0, t = 0;
  CUresult r = cu->cuCtxSetCurrent(ctx);
  if (r == CUDA_SUCCESS) r = cu->cuMemGetInfo(&f, &t);
  cu->cuDevicePrimaryCtxRelease(dev);
  cuda_check(*cu, r, "cuMemGetInfo");
  *free_bytes = f;
  *total_bytes = t;
}

}  // namespace kplan::gpu
