#pragma once
// The sampling processors between the target's logits and the token picked, applied in the order
// the field uses (HF transformers, vLLM): penalties on the raw logits (repetition over prompt +
// output; frequency and presence over the output), then temperature, then the truncations top-k,
// top-p, min-p on the softmax weights. At temperature 0 the pick is the argmax of the penalised
// logits (the truncations keep the argmax, so they change nothing there).
//
// Lossless under DFlash / DDTree: the processors depend on the history only through the tokens
// emitted before the pick, and every pick the tree walk makes is emitted (an accepted child or the
// bonus token), so the walk's pick at a node sees exactly the history AR's pick would: the walk
// samples from the processed target distribution, as AR does (tests/unit/ddtree
// sampling_processors_test.cc: a chi-square test per processor, and the same-seed coupling).
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kplan {

struct SamplingOptions {
  int64_t top_k = 0;                // keep the k most likely tokens; 0: off
  double top_p = 1.0;               // keep the fewest most likely tokens whose mass reaches top_p; 1: off
  double min_p = 0.0;               // drop tokens below min_p x the most likely token's probability; 0: off
  double repetition_penalty = 1.0;  // > 1 discourages tokens of the prompt and output (positive logits
                                    // divided by it, negative ones multiplied); 1: off
  double frequency_penalty = 0.0;   // logit -= frequency_penalty x the token's count in the output; 0: off
  double presence_penalty = 0.0;    // logit -= presence_penalty when the token is in the output; 0: off

  bool penalises() const { return repetition_penalty != 1.0 || frequency_penalty != 0.0 || presence_penalty != 0.0; }
  bool truncates() const { return top_k > 0 || top_p < 1.0 || min_p > 0.0; }
};

// Throws kplan::Error naming the field (as `prefix` + its name) when a value is out of range:
// top_k < 0, top_p outside (0, 1], min_p outside [0, 1], repetition_penalty <= 0, non-finite
// penalties.
void validate_sampling(const SamplingOptions& options, const std::string& prefix = "");

class LogitsProcessor {
 public:
  LogitsProcessor(const SamplingOptions& options, std::span<const int32_t> prompt);

  // A token was emitted (counted for the penalties).
  void observe(int32_t token);
  // The penalised logits: `logits` itself when no penalty is set, else a copy in `scratch`.
  const float* penalised(const float* logits, int64_t vocab, std::vector<float>& scratch) const;
  // Zeroes the weights (softmax numerators, any scale) the truncations drop. At least the most
  // likely token always survives.
  void truncate(std::vector<double>& weights) const;
  const SamplingOptions& options() const { return options_; }

 private:
  SamplingOptions options_;
  std::unordered_map<int32_t, int64_t> output_counts_;  // frequency, presence
  std::unordered_map<int32_t, bool> seen_;              // repetition: prompt + output
};

}  // namespace kplan
