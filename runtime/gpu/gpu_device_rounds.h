#pragma once
// Whole greedy DDTree (and DFlash chain) rounds on the GPU, one CUDA graph each: the plan's
// round steps (compiler/passes/emit_round.cc, kernels_templates/ddtree_round.cuh) chained with
// the drafter's and the target's programs,
//   round_draft_inputs -> @draft -> round_tree/T -> @target/T + @draft_context/T -> round_walk/T
//   -> @target_commit + @draft_commit,
// so the only host work in a round is one graph launch and one read of the round's state (its
// yield: the accepted tokens and the next bonus, for EOS and streaming). The round is the host's
// round (runtime/ddtree/spec_decode.cc) step for step: the same tree, walk and commits.
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/gpu/gpu_target_model.h"
#include "runtime/step_model.h"

namespace kplan::gpu {

class GpuDeviceRounds final : public DeviceRounds {
 public:
  // Rounds verified in the target's bucket for `verify_tokens` tokens; throws kplan::Error when
  // the plan has no round steps for it (available() says whether it has). `on_commit(n)` is
  // told each round's accepted length (the drafter's context grows with it).
  GpuDeviceRounds(GpuTargetModel& target, int64_t verify_tokens, std::function<void(int64_t)> on_commit);
  static bool available(const plan::Plan& plan, int64_t verify_tokens);
  // Captures the round graph of every verify size the plan has round steps for (a session's
  // load), so no timed round captures one.
  static void prepare_all(GpuTargetModel& target);

  void begin(int32_t bonus, int64_t budget, bool single_path, int64_t remaining) override;
  RoundYield round() override;

 private:
  static std::vector<const plan::Bucket*> chain_for(const plan::Plan& plan, int64_t verify_tokens);

  GpuTargetModel& target_;
  GpuExecutor& exec_;
  std::vector<const plan::Bucket*> chain_;
  const plan::StepOutput* state_ = nullptr;  // round_walk/T's RoundState output
  int64_t tokens_ = 0;                        // the verify bucket's tokens
  std::vector<int32_t> words_;
  std::function<void(int64_t)> on_commit_;
};

}  // namespace kplan::gpu
