#pragma once
// What a decode did: tokens, verify rounds, acceptance, target forwards against plain AR, and
// wall time per stage.
#include <array>
#include <cstdint>

namespace kplan {

// Bins of the acceptance-length histogram: bin i counts the rounds that committed i + 1 tokens,
// the last one the rounds that committed kAcceptanceBins or more (= KPLAN_ACCEPTANCE_BINS).
inline constexpr int64_t kAcceptanceBins = 32;

// Seconds per stage. draft: the drafter's propose and observe (context features of the
// committed tokens); walk_commit: the walk plus the target's cache compaction. device_wait:
// of the rounds' wall time, how long the host sat waiting for the device (a GPU session's
// stream synchronisations; 0 on the CPU): the rest of a round is host work.
struct StageTimes {
  double prefill = 0, draft = 0, tree_build = 0, verify = 0, walk_commit = 0;
  double rounds = 0, device_wait = 0;  // the rounds' wall time, and the wait in it
};

struct DecodeStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  // Target steps after prefill (AR: one per token; speculative: one verify per round).
  int64_t rounds = 0;
  // Tokens committed by the rounds' verify passes: per round the root plus the accepted path
  // (= tokens each verify pass produced). Mean acceptance length = committed / rounds.
  int64_t committed_in_rounds = 0;
  // Rounds by the tokens they committed (see kAcceptanceBins): sums to rounds, and
  // sum of (i + 1) * bin i equals committed_in_rounds while no round passes the last bin.
  std::array<int64_t, kAcceptanceBins> acceptance_histogram{};
  int64_t tree_nodes = 0;  // verify tokens over all rounds (roots included)
  int64_t target_forwards = 0;  // prefill (counted once) + rounds
  int64_t prefill_steps = 0;    // target steps the prefill took (chunks of the largest step)
  bool stopped_at_context = false;  // the cache filled up before max_new / EOS
  // Each round ran whole on the device as one graph (DeviceRounds): its time is in
  // seconds.verify, draft / tree_build / walk_commit stay 0.
  bool device_rounds = false;
  StageTimes seconds;

  // One round's verify pass committed `committed` tokens (the root + the accepted path; >= 1):
  // the one place committed_in_rounds and the histogram grow, so they always agree.
  void add_round_commit(int64_t committed) {
    committed_in_rounds += committed;
    const int64_t bin = committed < 1 ? 0 : committed > kAcceptanceBins ? kAcceptanceBins - 1 : committed - 1;
    ++acceptance_histogram[static_cast<size_t>(bin)];
  }

  double mean_acceptance_length() const {
    return rounds > 0 ? static_cast<double>(committed_in_rounds) / rounds : 0.0;
  }
  // Forwards plain AR needs for the same tokens: the prefill yields the first token, then one
  // step per further token.
  int64_t ar_forwards() const { return generated_tokens; }
};

}  // namespace kplan
