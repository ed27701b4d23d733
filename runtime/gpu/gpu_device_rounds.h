#pragma once
// Whole DDTree (and DFlash chain) rounds on the GPU, one CUDA graph each: the plan's round steps
// (compiler/passes/emit_round.cc, kernels_templates/ddtree_round.cuh) chained with the drafter's
// and the target's programs,
//   round_draft_inputs -> @draft -> round_tree/T -> @target/T + @draft_context/T
//   [-> round_sample/T at temperature > 0] -> round_walk/T -> @target_commit + @draft_commit,
// so the only host work in a round is one graph launch and one read of the round's state (its
// yield: the accepted tokens and the next bonus, for EOS and streaming). --budget auto splits a
// round in two graphs: the proposal (@draft's block inputs and @draft; the host reads back its
// candidates' log-probabilities and scores the tree at the largest budget to choose on) and the verify (round_tree
// builds the chosen budget's tree into bucket T's inputs, verify, walk, commits). The rounds
// are the host's rounds (runtime/ddtree/spec_decode.cc) step for step: the same trees, picks,
// walks and commits.
#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "runtime/gpu/gpu_target_model.h"
#include "runtime/step_model.h"

namespace kplan::gpu {

class GpuDeviceRounds final : public DeviceRounds {
 public:
  // Rounds verified in the target's buckets of up to `verify_tokens` tokens; throws kplan::Error
  // when the plan has no round steps for it (available() says whether it has; sampled: with
  // round_sample's). `on_commit(n)` is told each round's accepted length (the drafter's context
  // grows with it).
  GpuDeviceRounds(GpuTargetModel& target, int64_t verify_tokens, std::function<void(int64_t)> on_commit);
  static bool available(const plan::Plan& plan, int64_t verify_tokens, bool sampled = false);
  // Captures the round graphs of every verify size the plan has round steps for (a session's
  // load), so no timed round captures one.
  static void prepare_all(GpuTargetModel& target);

  void begin(int32_t bonus, int64_t budget, bool single_path, int64_t remaining,
             const RoundSampling& sampling = {}) override;
  // A budget other than the last round's is written into the state before the launch (no wait).
  RoundYield round(int64_t budget) override;
  ProposedCandidates propose() override;
  RoundYield verify(int64_t budget) override;

 private:
  // The chains: a whole round, its proposal, its verify (by the verify bucket's tokens).
  enum class Part { kWhole, kPropose, kVerify };
  static std::vector<const plan::Bucket*> chain_for(const plan::Plan& plan, int64_t verify_tokens, bool sampled, Part part);
  const std::vector<const plan::Bucket*>& chain(int64_t verify_tokens, Part part);  // begin's sampling
  void set_word(int word, int32_t value);  // enqueued, when it changes
  RoundYield finish(const plan::Bucket& verify_bucket);  // the one wait and the state's checks

  GpuTargetModel& target_;
  GpuExecutor& exec_;
  std::map<std::tuple<int64_t, Part, bool>, std::vector<const plan::Bucket*>> chains_;
  const plan::StepOutput* state_ = nullptr;  // the round_walk buckets' RoundState output (one slot)
  uint32_t sample_slot_ = 0;                  // round_sample's parameters ("round.sample")
  bool sampled_ = false;                      // begin's rounds sample (temperature > 0)
  int64_t max_tokens_ = 0;                    // the largest verify bucket these rounds use
  int64_t largest_ = 0;                       // the plan's largest round bucket (the state's layout)
  int64_t max_budget_ = 0;                    // begin's budget
  std::vector<int32_t> words_;
  std::function<void(int64_t)> on_commit_;
};

}  // namespace kplan::gpu
