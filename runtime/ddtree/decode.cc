// decode(): input checks, then the loop for the chosen mode.
#include "runtime/ddtree/decode.h"

#include <string>

#include "ir/support/error.h"

namespace kplan {

void check_prompt(const TargetModel& target, std::span<const int32_t> prompt) {
  if (prompt.empty()) throw Error("the prompt is empty: give at least one token id");
  const int64_t vocab = target.config().vocab_size;
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      throw Error("prompt token id " + std::to_string(prompt[i]) + " (at index " +
                  std::to_string(i) + ") is outside the vocabulary [0, " + std::to_string(vocab) +
                  ")");
  if (static_cast<int64_t>(prompt.size()) > target.max_context())
    throw Error("the prompt has " + std::to_string(prompt.size()) +
                " tokens, longer than the context of " + std::to_string(target.max_context()));
}

DecodeResult decode(TargetModel& target, Drafter* drafter, std::span<const int32_t> prompt,
                    const DecodeOptions& options) {
  check_prompt(target, prompt);
  if (options.max_new < 1) throw Error("max_new must be at least 1");
  if (options.temperature < 0) throw Error("the temperature must not be negative");
  validate_sampling(options.sampling);
  target.reset();
  if (options.spec == SpecMode::kNone) return decode_autoregressive(target, prompt, options);

  const char* mode = options.spec == SpecMode::kDFlash ? "dflash" : "ddtree";
  if (drafter == nullptr)
    throw Error(std::string("speculative decoding (") + mode + ") needs a drafter");
  if (options.spec == SpecMode::kDDTree && options.budget < 1 && options.budget != kBudgetAuto)
    throw Error("the DDTree budget must be at least 1 node (got " +
                std::to_string(options.budget) + ")");
  if (drafter->max_depth() < 1) throw Error("the drafter proposes no positions (max depth 0)");
  drafter->reset();
  return decode_speculative(target, *drafter, prompt, options);
}

}  // namespace kplan
