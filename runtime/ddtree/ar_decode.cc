// Plain autoregressive decoding: one target step per token.
#include <vector>

#include "runtime/ddtree/decode.h"
#include "runtime/ddtree/prefill.h"
#include "runtime/ddtree/stage_clock.h"
#include "runtime/ddtree/token_sampler.h"
#include "runtime/ddtree/token_sink.h"

namespace kplan {

DecodeResult decode_autoregressive(TargetModel& target, std::span<const int32_t> prompt,
                                   const DecodeOptions& options) {
  DecodeResult result;
  DecodeStats& stats = result.stats;
  stats.prompt_tokens = static_cast<int64_t>(prompt.size());
  TokenSampler sampler(options, prompt);
  TokenSink sink(options.max_new, options.eos_ids, options.on_token);

  double t0 = seconds_now();
  target.set_capture_layers({});
  StepOutput out = prefill(target, prompt, sampler.greedy());
  stats.target_forwards = 1;
  stats.prefill_steps = prefill_steps(target, stats.prompt_tokens);
  int32_t next = sampler.pick(out, (out.token_ids.empty() ? out.logits.rows : static_cast<int64_t>(out.token_ids.size())) - 1);
  stats.seconds.prefill = seconds_now() - t0;
  sink.push(next);

  const double rounds_start = seconds_now(), wait_start = target.device_wait_seconds();
  while (!sink.done()) {
    if (target.cache_length() + 1 > target.max_context()) {
      stats.stopped_at_context = true;
      break;
    }
    t0 = seconds_now();
    StepInput in;
    in.tokens = {next};
    in.positions = {static_cast<int32_t>(target.cache_length())};
    in.ids_only = sampler.greedy();
    out = target.forward(in);
    const double t1 = seconds_now();
    const int32_t keep[] = {0};
    target.commit(keep);
    next = sampler.pick(out, 0);
    stats.seconds.verify += t1 - t0;
    stats.seconds.walk_commit += seconds_now() - t1;
    ++stats.rounds;
    ++stats.target_forwards;
    stats.add_round_commit(1);
    ++stats.tree_nodes;
    sink.push(next);
  }
  stats.seconds.rounds = seconds_now() - rounds_start;
  stats.seconds.device_wait = target.device_wait_seconds() - wait_start;
  result.tokens = sink.tokens();
  stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  return result;
}

}  // namespace kplan
