#pragma once
// Runs the prompt through the target after the committed cache and commits all of it, in causal
// chunks of at most target.max_step_tokens() tokens (one step when the target has no limit):
// the one prefill every decode loop and the C API use, so no caller sends a step larger than the
// target's largest bucket.
#include <cstdint>
#include <functional>
#include <span>

#include "runtime/step_model.h"

namespace kplan {

// The prefill's output: `logits` (and `token_ids`) hold the last chunk's rows, so row
// rows - 1 is the prompt's last token; `captured` holds every prompt token's rows (the chunks'
// captured layer outputs stacked in order), as the drafter's observe() takes them.
// `ids_only`: greedy callers need no logits (see StepInput::ids_only).
// `on_chunk`, when set, sees each chunk's step and output right after its commit (a drafter
// observes the committed rows there, while the chunk's features are still the target's last).
using PrefillChunkHook = std::function<void(const StepInput& step, const StepOutput& out)>;
StepOutput prefill(TargetModel& target, std::span<const int32_t> prompt, bool ids_only = false,
                   const PrefillChunkHook& on_chunk = {});

// The chunk size prefill uses for `prompt_tokens` tokens on `target`, and how many steps it takes.
int64_t prefill_chunk(const TargetModel& target, int64_t prompt_tokens);
int64_t prefill_steps(const TargetModel& target, int64_t prompt_tokens);

}  // namespace kplan
