#pragma once
// A plan loaded onto one GPU, shared by every session on it: the device's primary context, the
// plan's cubins for this GPU's arch as modules, and the weights uploaded once. Sessions
// (GpuExecutor) add what is theirs alone: a stream, the activation arena with its KV caches,
// pinned staging and one CUDA graph per bucket.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/gpu/gpu_device.h"
#include "schemas/plan_model.h"

namespace kplan::gpu {

struct CudaDriver;

class GpuModel {
 public:
  // Throws kplan::Error: "no GPU: ..." without a driver or device, the arch refusal, or the
  // driver's error for a failed load. `source` names the plan in messages.
  // `on_upload` (may be empty): the weight bytes copied to the device so far of those to copy,
  // (0, total) first, then after every chunk of kUploadChunkBytes.
  using UploadProgress = std::function<void(uint64_t done, uint64_t total)>;
  static constexpr uint64_t kUploadChunkBytes = uint64_t{64} << 20;
  GpuModel(std::shared_ptr<const plan::Plan> plan, std::string source, UploadProgress on_upload = {});
  ~GpuModel();
  GpuModel(const GpuModel&) = delete;
  GpuModel& operator=(const GpuModel&) = delete;

  const plan::Plan& plan() const { return *plan_; }
  const std::shared_ptr<const plan::Plan>& plan_ptr() const { return plan_; }
  const std::string& source() const { return source_; }
  const DeviceInfo& device() const { return device_; }
  const std::string& arch() const { return arch_; }  // the plan arch whose cubins were loaded
  const CudaDriver& driver() const { return *cu_; }
  void* context() const { return context_; }  // CUcontext
  // Makes the model's context current on the calling thread.
  void make_current() const;

  // Device address of weight `index` (+ offset); the CUfunction of kernel `index`.
  uint64_t weight_address(uint32_t index, uint64_t offset) const;
  uint64_t weights_base() const { return weights_; }  // CUdeviceptr of all weights
  const std::vector<uint64_t>& weight_offsets() const { return weight_offsets_; }
  void* function(uint32_t kernel) const { return functions_[kernel]; }

  uint64_t weight_bytes() const { return weight_bytes_; }  // on the device
  int weight_uploads() const { return weight_uploads_; }   // 1: the constructor's, never more
  uint64_t weight_upload_bytes() const { return weight_upload_bytes_; }
  // Bytes of synthetic weights generated on the device at load (runtime/gpu/synthetic_weights.h).
  uint64_t synthetic_weight_bytes() const { return synthetic_bytes_; }
  double load_seconds() const { return load_seconds_; }    // modules + weight upload / generation

 private:
  void release();
  void upload_weights(const UploadProgress& on_upload);
  void load_modules();

  std::shared_ptr<const plan::Plan> plan_;
  std::string source_;
  const CudaDriver* cu_ = nullptr;
  DeviceInfo device_;
  std::string arch_;
  void* context_ = nullptr;  // CUcontext (primary)
  int device_index_ = 0;
  uint64_t weights_ = 0;     // CUdeviceptr of all weights
  uint64_t weight_bytes_ = 0;
  int weight_uploads_ = 0;
  uint64_t weight_upload_bytes_ = 0;
  uint64_t synthetic_bytes_ = 0;
  std::vector<uint32_t> synthetic_pending_;  // synthetic weights with device storage
  double load_seconds_ = 0;
  std::vector<uint64_t> weight_offsets_;  // device offset of each weight in weights_
  std::vector<void*> modules_;            // CUmodule per kernel
  std::vector<void*> functions_;          // CUfunction per kernel
};

}  // namespace kplan::gpu
