#pragma once
// One kplan_session_generate call timed by the wall clock, and the figures a measurement adds up
// over such calls (per mode, over prompts): what `kplan run --spec compare` and `kplan bench
// --acceptance` report.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kplan/kplan.h"

namespace kplan::cli {

struct TimedGenerate {
  std::vector<int32_t> tokens;
  kplan_generate_stats stats{};
  double wall_seconds = 0;  // the whole generate call: prefill, rounds, drafter
};

// Throws kplan::Error with the runtime's message when the generate fails.
TimedGenerate generate_timed(kplan_session* session, std::span<const int32_t> prompt,
                             const kplan_generate_options& options);

// One untimed DDTree decode (the options' budget) of a few tokens before the timed ones: every
// stage runs once (the CPU reads its fp32 weights on first use, the drafter likewise), so the
// first timed mode is not charged for it. Returns the note the commands print about it.
inline constexpr int32_t kWarmUpTokens = 8;
std::string warm_up(kplan_session* session, std::span<const int32_t> prompt, const kplan_generate_options& options);

// Sums over one or more generates of one mode.
struct DecodeFigures {
  int64_t generates = 0;
  int64_t tokens = 0;               // generated
  int64_t rounds = 0;               // target steps after prefill
  int64_t committed_in_rounds = 0;  // tokens those rounds produced
  int64_t tree_nodes = 0;           // verify tokens over all rounds
  int64_t target_forwards = 0;      // prefill (once per generate) + rounds
  double wall_seconds = 0;

  void add(const TimedGenerate& g);
  // committed_in_rounds / rounds: tokens per verify pass (1 for AR); 0 without rounds.
  double mean_acceptance_length() const;
  double tokens_per_second() const;  // tokens / wall_seconds; 0 when no time was measured
  double tokens_per_target_forward() const;
};

// The labelled figures of `--stats` on stderr (`stats: rounds  31`, ...): counts, tokens/s over
// the generate call's wall time, the acceptance-length histogram (one line per length from 1 to
// the longest seen: rounds that committed that many tokens, and a bar), and the time per stage
// with its per-round average in µs; "host/other" is the wall time the stages do not account for
// (drafter load, the oracle's reference decode, the loop's own host work).
void print_generate_stats(const TimedGenerate& g);

// --drafter dflash|oracle|random (CLI11 restricts the choices).
kplan_drafter_kind drafter_kind(const std::string& drafter);

// "AR", "DFlash chain" or "DDTree budget 16".
std::string mode_label(kplan_spec_mode spec, int32_t budget);
// A DDTree budget as the CLI takes it: a node count >= 1, or "auto" (KPLAN_BUDGET_AUTO).
// Throws kplan::Error naming `flag`.
int32_t parse_budget(const std::string& text, const std::string& flag);

}  // namespace kplan::cli
