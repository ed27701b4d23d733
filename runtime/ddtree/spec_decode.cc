// Speculative decoding rounds (DFlash's single path and DDTree's tree): draft from the bonus
// token, build the tree, verify it in one target step, walk it, commit the accepted path, feed
// the drafter the committed tokens, carry the target's next token as the new bonus.
#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "runtime/ddtree/budget_chooser.h"
#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/draft_tree.h"
#include "runtime/ddtree/prefill.h"
#include "runtime/ddtree/stage_clock.h"
#include "runtime/ddtree/token_sampler.h"
#include "runtime/ddtree/token_sink.h"
#include "runtime/ddtree/tree_walk.h"

namespace kplan {

DecodeResult decode_speculative(TargetModel& target, Drafter& drafter,
                                std::span<const int32_t> prompt, const DecodeOptions& options) {
  DecodeResult result;
  DecodeStats& stats = result.stats;
  stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  TokenSampler sampler(options, prompt);
  TokenSink sink(options.max_new, options.eos_ids, options.on_token);
  const int64_t vocab = target.config().vocab_size;
  const bool single_path = options.spec == SpecMode::kDFlash;

  // --budget auto: the tree of each round sized by the target's step costs (measured before the
  // prefill, which they must not disturb) and the acceptance seen so far.
  std::optional<BudgetChooser> own;
  BudgetChooser* chooser = nullptr;
  if (!single_path && options.budget == kBudgetAuto) {
    chooser = options.budget_chooser;
    if (!chooser) chooser = &own.emplace(BudgetChooser::for_step_costs(target.step_costs()));
  }
  double t0 = seconds_now();
  target.set_capture_layers(drafter.capture_layers());
  // The drafter reads each prefill chunk's features after its commit (a GPU drafter finds them
  // in the target's output buffers, which the next chunk overwrites).
  StepOutput out = prefill(target, prompt, sampler.greedy(), [&](const StepInput& step, const StepOutput& chunk) {
    std::vector<int32_t> rows(step.tokens.size());
    std::iota(rows.begin(), rows.end(), 0);
    drafter.observe_step(step, chunk, rows);
  });
  stats.target_forwards = 1;
  stats.prefill_steps = prefill_steps(target, stats.prompt_tokens);
  int32_t bonus = sampler.pick(out, (out.token_ids.empty() ? out.logits.rows : static_cast<int64_t>(out.token_ids.size())) - 1);
  stats.seconds.prefill = seconds_now() - t0;
  sink.push(bonus);

  const double rounds_start = seconds_now(), wait_start = target.device_wait_seconds();
  // A round verified `nodes` tokens and committed `committed` (root + accepted path), whoever ran it.
  auto count_round = [&](int64_t nodes, int64_t committed) {
    ++stats.rounds;
    ++stats.target_forwards;
    stats.add_round_commit(committed);
    stats.tree_nodes += nodes;
  };
  // Whole rounds on the device: the same trees, picks, walks and commits as the loop below, with
  // one launch and one read per round (greedy, or plain temperature sampling with the sampler's
  // draws); --budget auto takes two, choosing the budget from the round's own tree in between.
  const int64_t largest = single_path ? drafter.max_depth() : chooser ? chooser->max_budget() : options.budget;
  const bool device_sampling = sampler.plain_temperature();
  DeviceRounds* device = options.device_rounds && (sampler.greedy() || device_sampling) && drafter.max_depth() > 0
                             ? drafter.device_rounds(1 + largest, device_sampling)
                             : nullptr;
  if (device) {
    RoundSampling sampling;
    if (device_sampling) sampling = {sampler.temperature(), sampler.seed(), sampler.draws()};
    device->begin(bonus, largest, single_path, sink.remaining(), sampling);
    stats.device_rounds = true;
  }
  while (device && !sink.done()) {
    const int64_t room = target.max_context() - target.cache_length();
    if (room < 1) {
      stats.stopped_at_context = true;
      break;
    }
    t0 = seconds_now();
    RoundYield y;
    if (chooser) {
      // The tree the device would build at the largest budget, scored here from the drafter's
      // candidates to choose on (the same pops); the device builds the chosen prefix.
      const ProposedCandidates draft = device->propose();
      const double proposed = seconds_now();
      TreeShape shape;
      shape.max_depth = std::min({drafter.max_depth(), sink.remaining() - 1, room - 1, draft.rows});
      shape.budget = std::min(largest, room - 1);
      // Scored only until no larger budget can win (BudgetSearch's bound).
      BudgetSearch search(*chooser);
      const std::vector<double> scores =
          shape.max_depth > 0 && shape.budget > 0
              ? draft_tree_scores(draft.log_probs, draft.width, shape, [&](double s) { return search.push(s); })
              : std::vector<double>{0.0};
      const int64_t budget = search.best();
      const double chosen = seconds_now();
      stats.seconds.draft += proposed - t0;
      stats.seconds.tree_build += chosen - proposed;
      y = device->verify(budget);
      stats.seconds.verify += seconds_now() - chosen;
      if (scores.size() > 1)
        chooser->observe(std::span<const double>(scores.data(), std::min(scores.size(), static_cast<size_t>(budget) + 1)),
                         static_cast<int64_t>(y.tokens.size()) - 1, proposed - t0);
    } else {
      y = device->round(largest);
      stats.seconds.verify += seconds_now() - t0;  // the whole round: one graph
    }
    count_round(y.nodes, static_cast<int64_t>(y.tokens.size()));
    for (int32_t token : y.tokens) sink.push(token);
    bonus = y.tokens.back();
  }
  while (!device && !sink.done()) {
    const int64_t root_position = target.cache_length();
    const int64_t room = target.max_context() - root_position;  // verify tokens that still fit
    if (room < 1) {
      stats.stopped_at_context = true;
      break;
    }
    // A path of L nodes yields L + 1 tokens (with the next bonus): deeper nodes than the tokens
    // still wanted, or than the context holds, could never be used.
    const int64_t depth = std::min({drafter.max_depth(), sink.remaining() - 1, room - 1});
    TreeShape shape;
    shape.max_depth = depth;
    shape.budget = single_path ? depth : std::min(chooser ? chooser->max_budget() : options.budget, room - 1);
    shape.top_k = single_path ? 1 : 0;

    t0 = seconds_now();
    // Each depth's best min(budget, vocab) tokens are all a tree of `budget` nodes can use.
    const int64_t k = std::min(single_path ? int64_t{1} : shape.budget, vocab);
    DepthCandidates draft;
    if (depth > 0) draft = drafter.propose_top(bonus, static_cast<int32_t>(root_position), depth, k);
    if (draft.depth > 0 && (draft.depth < depth || draft.k < k))
      throw Error("drafter: proposed " + std::to_string(draft.k) + " candidates at " + std::to_string(draft.depth) +
                  " depths, the round needs " + std::to_string(k) + " at " + std::to_string(depth));
    for (int32_t id : draft.ids)
      if (id < 0 || id >= vocab)
        throw Error("drafter: proposed token " + std::to_string(id) + " outside the target's vocabulary of " +
                    std::to_string(vocab));
    double t1 = seconds_now();
    const double propose_seconds = t1 - t0;
    stats.seconds.draft += propose_seconds;

    DraftTree tree = build_draft_tree(bonus, draft, shape);
    if (chooser) tree = truncate_tree(tree, chooser->choose(tree));
    t0 = seconds_now();
    stats.seconds.tree_build += t0 - t1;

    StepInput verify = tree_step_input(tree, static_cast<int32_t>(root_position));
    verify.ids_only = sampler.greedy();
    const StepOutput verified = target.forward(verify);
    t1 = seconds_now();
    stats.seconds.verify += t1 - t0;

    const WalkResult walk = walk_tree(tree, verified, sampler);
    target.commit(walk.accepted);
    t0 = seconds_now();
    stats.seconds.walk_commit += t0 - t1;
    // Feeding the drafter the committed tokens' features is drafter work: count it as draft.
    drafter.observe_step(verify, verified, walk.accepted);
    const double observed = seconds_now();
    stats.seconds.draft += observed - t0;
    if (chooser) chooser->observe(tree, static_cast<int64_t>(walk.accepted.size()) - 1, propose_seconds + (observed - t0));

    count_round(tree.size(), static_cast<int64_t>(walk.accepted.size()));
    for (size_t i = 1; i < walk.accepted.size(); ++i) sink.push(tree.tokens[walk.accepted[i]]);
    sink.push(walk.next_token);
    bonus = walk.next_token;
  }
  stats.seconds.rounds = seconds_now() - rounds_start;
  stats.seconds.device_wait = target.device_wait_seconds() - wait_start;
  result.tokens = sink.tokens();
  stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  return result;
}

}  // namespace kplan
