#pragma once
// The GPU this process runs on (device 0): what it is, and how much of its memory is free.
#include <cstdint>
#include <string>

namespace kplan::gpu {

struct DeviceInfo {
  std::string name;  // "NVIDIA H200"
  std::string arch;  // "sm_90"
  int sm_count = 0;
  uint64_t memory_bytes = 0;
  int driver_version = 0;  // e.g. 13000
};

// Describes the first GPU; false with `why` set ("no GPU: ...") when there is no usable one.
bool probe_device(DeviceInfo* info, std::string* why);

// Free and total device memory (cuMemGetInfo) in the device's primary context. Throws
// kplan::Error ("no GPU: ...") without a GPU.
void device_memory(uint64_t* free_bytes, uint64_t* total_bytes);

}  // namespace kplan::gpu
