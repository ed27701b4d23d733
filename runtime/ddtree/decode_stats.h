#pragma once
// What a decode did: tokens, verify rounds, acceptance, target forwards against plain AR, and
// wall time per stage.
#include <cstdint>

namespace kplan {

// Seconds per stage. draft: the drafter's propose and observe (context features of the
// committed tokens); walk_commit: the walk plus the target's cache compaction.
struct StageTimes {
  double prefill = 0, draft = 0, tree_build = 0, verify = 0, walk_commit = 0;
};

struct DecodeStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // Target steps after prefill (AR: one per token; speculative: one verify per round).
  int64_t rounds = 0;
  // Tokens committed by the rounds' verify passes: per round the root plus the accepted path
  // (= tokens each verify pass produced). Mean acceptance length = committed / rounds.
  int64_t committed_in_rounds = 0;
  int64_t tree_nodes = 0;  // verify tokens over all rounds (roots included)
  int64_t target_forwards = 0;  // prefill (counted once) + rounds
  int64_t prefill_steps = 0;    // target steps the prefill took (chunks of the largest step)
  bool stopped_at_context = false;  // the cache filled up before max_new / EOS
  StageTimes seconds;

  double mean_acceptance_length() const {
    return rounds > 0 ? static_cast<double>(committed_in_rounds) / rounds : 0.0;
  }
  // Forwards plain AR needs for the same tokens: the prefill yields the first token, then one
  // step per further token.
  int64_t ar_forwards() const { return generated_tokens; }
};

}  // namespace kplan
