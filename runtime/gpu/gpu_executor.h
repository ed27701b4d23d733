#pragma once
// Runs a plan's launch sequences on one GPU through the driver API: the plan's cubins for this
// GPU's arch loaded with cuModuleLoadData, one device arena per the buffer plan, weights uploaded
// once, and one CUDA graph per bucket built at load by stream capture of its launches (the
// plain-launch path, KPLAN_NO_GRAPHS=1 or Options::use_graphs = false, launches them one by one
// for debugging and profiling). Step inputs are written into their arena slots before a graph
// replays, so graphs never need rebuilding.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "schemas/plan_model.h"

namespace kplan::gpu {

struct CudaDriver;

// What the host writes before one step (already padded to the bucket's token count).
struct StepInputs {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<uint32_t> tree_mask;  // [bucket tokens, ceil(bucket tokens / 32)]
  int32_t cache_length = 0;
  int32_t token_count = 0;
};

struct DeviceInfo {
  std::string name;  // "NVIDIA H200"
  std::string arch;  // "sm_90"
  int sm_count = 0;
  uint64_t memory_bytes = 0;
  int driver_version = 0;  // e.g. 13000
};

// Describes the first GPU; false with `why` set ("no GPU: ...") when there is no usable one.
bool probe_device(DeviceInfo* info, std::string* why);

class GpuExecutor {
 public:
  struct Options {
    bool use_graphs = true;  // false (or env KPLAN_NO_GRAPHS=1): plain launches
  };
  // Throws kplan::Error: "no GPU: ..." without a driver or device, the arch refusal, or the
  // driver's error for a failed load. `source` names the plan in messages.
  GpuExecutor(std::shared_ptr<const plan::Plan> plan, std::string source, Options options);
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  const plan::Plan& plan() const { return *plan_; }
  const DeviceInfo& device() const { return device_; }
  const std::string& arch() const { return arch_; }  // the plan arch whose cubins were loaded
  bool uses_graphs() const { return use_graphs_; }
  double load_seconds() const { return load_seconds_; }      // modules + uploads + graphs
  uint64_t device_bytes() const { return arena_bytes_ + weight_bytes_; }

  // Writes the step inputs, runs the bucket (graph replay or plain launches) and waits.
  void run(const plan::Bucket& bucket, const StepInputs& in);
  // Reads rows [0, rows) of an output of the last run as f32 (converting from bf16/f16).
  void read_output(const plan::StepOutput& out, int64_t rows, float* dst);
  // Moves KV cache rows within every KV cache: row from[i] -> row to[i], in order.
  void move_kv_rows(std::span<const int64_t> from, std::span<const int64_t> to);
  // Replays the bucket `reps` times after `warmup` replays, with the current step inputs, and
  // returns each replay's GPU time in milliseconds (CUDA events).
  std::vector<float> time_bucket(const plan::Bucket& bucket, int warmup, int reps);
  // Fills the whole arena with zeros (fresh KV caches).
  void clear_arena();

 private:
  struct LaunchParams;
  void release();  // frees every device resource (destructor, failed constructor)
  void upload_weights();
  void load_modules();
  void prepare_launches();
  void build_graphs();
  void enqueue(const plan::Bucket& bucket);
  void write_inputs(const StepInputs& in);
  size_t bucket_index(const plan::Bucket& bucket) const;

  std::shared_ptr<const plan::Plan> plan_;
  std::string source_;
  const CudaDriver* cu_ = nullptr;
  DeviceInfo device_;
  std::string arch_;
  bool use_graphs_ = true;
  double load_seconds_ = 0;
  void* context_ = nullptr;  // CUcontext (primary)
  int device_index_ = 0;
  void* stream_ = nullptr;   // CUstream
  uint64_t arena_ = 0;       // CUdeviceptr
  uint64_t arena_bytes_ = 0;
  uint64_t weights_ = 0;     // CUdeviceptr of all weights
  uint64_t weight_bytes_ = 0;
  std::vector<uint64_t> weight_offsets_;  // device offset of each weight in weights_
  std::vector<void*> modules_;            // CUmodule per kernel
  std::vector<void*> functions_;          // CUfunction per kernel
  std::vector<std::vector<LaunchParams>> params_;  // per bucket, per launch
  std::vector<void*> graphs_;             // CUgraphExec per bucket
  uint8_t* pinned_ = nullptr;             // staging for step inputs and outputs
  uint64_t pinned_bytes_ = 0;
};

}  // namespace kplan::gpu
