#pragma once
// The plan's DFlash drafter on the GPU, in the session of the target it drafts for: its programs
// (compiled beside the target's, compiler/passes/bucketize.cc) run in the target's arena, where
// its context caches live and where the target's captured layer outputs already sit.
//
// A round: the drafter's @draft_context runs in the same graph as each target step (a verify, or
// a prefill chunk: the same step inputs), over every row of it (each row's context K/V appended
// pending after the drafter's cache, as the target's own KV is), and @draft_commit in the same
// graph as the target's commit with the rows it kept, so no feature crosses PCIe and neither
// costs a launch of its own (GpuTargetModel::set_followers). propose_top replays @draft for
// [bonus, mask ...] and reads back only each depth's top candidates (the plan's topk of the
// drafter's log-probs).
// The same computation as the CPU drafter (runtime/cpu/dflash_drafter.h), which the tests hold
// it to.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/gpu/gpu_device_rounds.h"
#include "runtime/gpu/gpu_target_model.h"
#include "runtime/step_model.h"

namespace kplan::gpu {

class GpuDFlashDrafter final : public Drafter {
 public:
  // Throws kplan::Error when the plan has no drafter lowered for the GPU (compiled before the
  // drafter ran there, or without --draft). `target` must outlive the drafter.
  explicit GpuDFlashDrafter(GpuTargetModel& target);
  ~GpuDFlashDrafter() override;  // the target's steps run alone again
  GpuDFlashDrafter(const GpuDFlashDrafter&) = delete;
  GpuDFlashDrafter& operator=(const GpuDFlashDrafter&) = delete;

  // The host path is refused: the GPU drafter reads the target's step where it lies.
  void observe(std::span<const int32_t> tokens, std::span<const int32_t> positions,
               const std::vector<Matrix>& captured) override;
  void observe_step(const StepInput& step, const StepOutput& out, std::span<const int32_t> rows) override;
  Matrix propose(int32_t bonus_token, int32_t bonus_position) override;  // log-softmax of the logits
  DepthCandidates propose_top(int32_t bonus_token, int32_t bonus_position, int64_t depth, int64_t k) override;
  // None: the features stay on the device (the target's outputs), nothing is copied back.
  std::vector<int64_t> capture_layers() const override { return {}; }
  int64_t max_depth() const override { return block_size_ - 1; }
  void reset() override { context_length_ = 0; }
  // Whole rounds as one graph each (gpu_device_rounds.h), when the plan has the round steps for
  // a verify of `verify_tokens` (sampled: and round_sample's; null otherwise).
  DeviceRounds* device_rounds(int64_t verify_tokens, bool sampled = false) override;
  int64_t context_length() const { return context_length_; }

 private:
  void run_draft(int32_t bonus_token, int32_t bonus_position);
  const plan::StepOutput* draft_output(plan::OutputKind kind) const;

  GpuTargetModel& target_;
  GpuExecutor& exec_;
  const plan::Bucket* draft_ = nullptr;
  int64_t block_size_ = 0;
  int32_t mask_token_ = 0;
  int64_t context_length_ = 0;
  std::unique_ptr<GpuDeviceRounds> rounds_;
  int64_t rounds_tokens_ = 0;
};

}  // namespace kplan::gpu
