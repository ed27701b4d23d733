#pragma once
// The decoding loops: plain AR, DFlash (one draft path: the drafter's argmax chain) and DDTree
// (a best-first tree of `budget` nodes), each over any TargetModel / Drafter.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "runtime/ddtree/decode_stats.h"
#include "runtime/ddtree/logits_processor.h"
#include "runtime/step_model.h"

namespace kplan {

enum class SpecMode { kNone, kDFlash, kDDTree };
class BudgetChooser;

// DecodeOptions::budget: chosen each round (runtime/ddtree/budget_chooser.h).
inline constexpr int64_t kBudgetAuto = -1;

struct DecodeOptions {
  SpecMode spec = SpecMode::kNone;
  // DDTree: tree nodes per round (the verify step has 1 + budget tokens), or kBudgetAuto.
  int64_t budget = 0;
  int64_t max_new = 16;
  std::vector<int64_t> eos_ids;  // stop after emitting one of these
  double temperature = 0.0;      // 0: greedy
  uint64_t seed = 0;             // sampling at temperature > 0
  SamplingOptions sampling;      // top-k / top-p / min-p, penalties (lossless: logits_processor.h)
  // Called with each token the decode emits, in order (TokenSink); false stops the decode after
  // it (a stop string matched, a stream's reader gone).
  std::function<bool(int32_t)> on_token;
  // kBudgetAuto: the chooser to use and teach (a session keeps one across its decodes); null:
  // the decode makes its own from the target's step costs.
  BudgetChooser* budget_chooser = nullptr;
  // Rounds run whole on the device when the drafter can (step_model.h DeviceRounds: greedy or
  // plain temperature sampling; one graph a round, two under --budget auto); false: the host runs
  // each round's steps (to compare).
  bool device_rounds = true;
};

struct DecodeResult {
  std::vector<int32_t> tokens;  // the new tokens (EOS included when it ended the decode)
  DecodeStats stats;
};

// Resets the target (and drafter), prefills the prompt and decodes. Throws kplan::Error on bad
// input: an empty prompt, ids outside the vocabulary, a prompt longer than the context, budget
// below 1 for DDTree, a speculative mode without a drafter.
DecodeResult decode(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                    const DecodeOptions& options);

// The prompt checks decode() makes (empty, ids outside the vocabulary, longer than the context),
// for callers that want them before other work.
void check_prompt(const TargetModel& target, std::span<const int32_t> prompt);

// The loops themselves, for callers that validated their input already.
DecodeResult decode_autoregressive(TargetModel& target, std::span<const int32_t> prompt,
                                   const DecodeOptions& options);
DecodeResult decode_speculative(TargetModel& target, Drafter& drafter,
                                std::span<const int32_t> prompt, const DecodeOptions& options);

}  // namespace kplan
