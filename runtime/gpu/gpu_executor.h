#pragma once
// One session's execution of a plan on the GPU of a GpuModel (whose modules and weights it
// shares with every other session): its own stream, one device arena per the buffer plan (KV
// caches included), pinned staging, and one CUDA graph per bucket built at creation by stream
// capture of its launches (the plain-launch path, KPLAN_NO_GRAPHS=1 or Options::use_graphs =
// false, launches them one by one for debugging and profiling). Step inputs are written into
// their arena slots before a graph replays, so graphs never need rebuilding.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/gpu/gpu_model.h"
#include "runtime/gpu/library_matmul.h"
#include "schemas/plan_model.h"

namespace kplan::gpu {

// What the host writes before one step (already padded to the bucket's token count).
struct StepInputs {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<uint32_t> tree_mask;  // [bucket tokens, ceil(bucket tokens / 32)]
  int32_t cache_length = 0;
  int32_t token_count = 0;
};

class GpuExecutor {
 public:
  struct Options {
    bool use_graphs = true;  // false (or env KPLAN_NO_GRAPHS=1): plain launches
    // Programmatic dependent launch between the kernels of buckets of at most 8 tokens (sm_90
    // and later; gpu_executor.cc says why; env KPLAN_PDL=all|none to measure); false: each
    // kernel starts after the one before it has finished.
    bool use_pdl = true;
  };
  // Throws kplan::Error with the driver's error for a failed allocation or graph build.
  GpuExecutor(std::shared_ptr<const GpuModel> model, Options options);
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  const GpuModel& model() const { return *model_; }
  const plan::Plan& plan() const { return model_->plan(); }
  const DeviceInfo& device() const { return model_->device(); }
  const std::string& arch() const { return model_->arch(); }
  bool uses_graphs() const { return use_graphs_; }
  uint32_t pdl_max_tokens() const { return pdl_max_tokens_; }  // buckets up to this use PDL
  double load_seconds() const { return load_seconds_; }  // arena + graphs (the model's load apart)
  // This session's own device memory: the arena, and the library calls' workspace where the plan has any.
  uint64_t device_bytes() const { return arena_bytes_ + (library_workspace_ ? kLibraryWorkspaceBytes : 0); }
  // Seconds the host has spent blocked in this session's stream synchronisations.
  double wait_seconds() const { return wait_seconds_; }

  // Writes the step inputs, runs the bucket (graph replay or plain launches) and waits; with
  // wait = false only enqueues it (a step whose outputs nobody reads before the next one: a
  // commit), so the host goes on while it runs. Its errors then surface at the next wait.
  void run(const plan::Bucket& bucket, const StepInputs& in, bool wait = true);
  // Buckets that run back to back on the same step inputs (a target step and the drafter's
  // context step; the two commits) as one graph, captured on first use.
  void run_chain(std::span<const plan::Bucket* const> chain, const StepInputs& in, bool wait = true);
  // Captures a chain's graph now (not in a timed step).
  void prepare_chain(std::span<const plan::Bucket* const> chain);
  // Enqueues a chain whose step inputs the device writes itself (a device round,
  // runtime/gpu/gpu_device_rounds.h): no input copy, no wait.
  void launch_chain(std::span<const plan::Bucket* const> chain);
  // Copies `bytes` from the host into a slot at `offset` (a device round's state): with wait,
  // after the queued work and waiting for the copy; without, enqueued (the next launch on the
  // stream sees it).
  void write_slot(uint32_t slot, uint64_t offset, const void* src, size_t bytes, bool wait = true);
  // Reads rows [0, rows) of an output of the last run as f32 (converting from bf16/f16).
  void read_output(const plan::StepOutput& out, int64_t rows, float* dst);
  // Reads rows [0, rows) of a TokenIds output of the last run.
  void read_ids(const plan::StepOutput& out, int64_t rows, int32_t* dst);
  // Reads rows [0, rows) of any i32 output (all its columns) of the last run.
  void read_i32(const plan::StepOutput& out, int64_t rows, int32_t* dst);
  // Several f32 / i32 outputs of the last run as they are (4-byte elements), one wait for all.
  struct RawRead {
    const plan::StepOutput* out;
    int64_t rows;
    void* dst;
  };
  void read_raw(std::span<const RawRead> reads);
  // Commits pending KV rows cache_length + keep[i] -> cache_length + i in every KV cache: a
  // replay of the plan's "target_commit" bucket when it has one (keep indices in the Tokens input, their
  // count in TokenCount; enqueued, the next step on the stream runs after it), else a few
  // device-to-device copies per cache (runtime/gpu/kv_moves.h).
  // `follower`: a bucket that takes the same inputs (the drafter's commit), in the same graph.
  void commit_kv(int64_t cache_length, std::span<const int32_t> keep, const plan::Bucket* follower = nullptr);
  // Replays the bucket `reps` times after `warmup` replays, with the current step inputs, and
  // returns each replay's GPU time in milliseconds (CUDA events).
  std::vector<float> time_bucket(const plan::Bucket& bucket, int warmup, int reps);
  // Runs the bucket `reps` times as plain launches (after one warm-up run) with an event between
  // every two launches, and returns each launch's GPU time in milliseconds, the median over the
  // runs (kplan bench --kernels). Each launch runs where it runs in the step, behind the ones
  // before it, so it finds the caches as the step leaves them (a launch replayed alone would find
  // its weights in L2); the events cost the step its programmatic dependent launch overlap.
  std::vector<float> time_launches(const plan::Bucket& bucket, int reps);
  // Each launch's marginal time inside the step's CUDA graph: graphs of the bucket's first k
  // launches (k = 1 .. all) are captured and replayed `reps` times each (after 3 warm-up replays),
  // and launch i's figure is the median replay of the first i + 1 launches less that of the first
  // i (ms). Unlike time_launches, each launch keeps its programmatic dependent launch overlap with
  // the one before: what removing it from the step would save (kplan bench --kernels). Figures
  // of a microsecond or two are within the replays' jitter (a tiny launch can read below zero).
  std::vector<float> time_graph_prefixes(const plan::Bucket& bucket, int reps);
  // Runs the bucket once on the current step inputs, launch by launch, and returns for each MoE
  // layer how many distinct routed experts its router chose for the first `rows` tokens (read
  // back from the device right after each router ran): the experts a step of that many tokens
  // must read (kplan bench).
  std::vector<int64_t> distinct_routed_experts(const plan::Bucket& bucket, int64_t rows);
  // Fills the whole arena with zeros (fresh KV caches).
  void clear_arena();

 private:
  struct LaunchParams;
  void release();
  void prepare_launches();
  void build_graphs();
  // A CUgraphExec of the buckets in order (their first launch_limit launches in all).
  void* capture(std::span<const plan::Bucket* const> chain, size_t launch_limit = SIZE_MAX);
  void* chain_graph(std::span<const plan::Bucket* const> chain);  // captured once, kept
  // Each of `reps` calls of `replay` timed by events (after `warmup` calls), in milliseconds.
  std::vector<float> time_replays(const std::function<void()>& replay, int warmup, int reps);
  void enqueue(const plan::Bucket& bucket);
  void enqueue_launch(const plan::Bucket& bucket, size_t launch);
  void launch(const plan::Bucket& bucket);  // graph replay or plain launches, no wait
  void write_inputs(const StepInputs& in);
  void synchronize(const std::string& what);  // the stream, timed (wait_seconds)
  void stage_output(const plan::StepOutput& out, int64_t rows, uint8_t** stage, size_t* count);
  size_t bucket_index(const plan::Bucket& bucket) const;

  std::shared_ptr<const GpuModel> model_;
  const CudaDriver* cu_ = nullptr;
  std::string source_;
  bool use_graphs_ = true;
  uint32_t pdl_max_tokens_ = 0;
  double load_seconds_ = 0;
  void* stream_ = nullptr;   // CUstream
  uint64_t arena_ = 0;       // CUdeviceptr
  uint64_t arena_bytes_ = 0;
  uint64_t library_workspace_ = 0;  // CUdeviceptr: the plan's library calls' workspace (none: 0)
  std::unique_ptr<LibraryHandle> library_handle_;  // their cuBLASLt handle (none: null)
  std::vector<std::vector<LaunchParams>> params_;  // per bucket, per launch
  std::vector<void*> graphs_;             // CUgraphExec per bucket
  std::map<std::vector<size_t>, void*> chain_graphs_;  // per chain of bucket indices
  uint8_t* pinned_ = nullptr;             // staging: kInputStages areas for step inputs, then outputs
  uint64_t pinned_bytes_ = 0;
  // Steps enqueued without a wait read their inputs from staging areas in turn, so the host
  // never overwrites an area a queued copy has yet to read.
  static constexpr int kInputStages = 4;
  uint64_t input_stage_bytes_ = 0;
  uint64_t inputs_begin_ = 0;           // the step inputs' span in the arena
  std::vector<uint8_t> inputs_image_;   // its host image: every input's last value
  int next_stage_ = 0, in_flight_ = 0;
  double wait_seconds_ = 0;
};

}  // namespace kplan::gpu
