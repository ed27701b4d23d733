#include "runtime/ddtree/prefill.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace kplan {

int64_t prefill_chunk(const TargetModel& target, int64_t prompt_tokens) {
  const int64_t limit = target.max_step_tokens();
  return limit > 0 ? std::min(limit, prompt_tokens) : prompt_tokens;
}

int64_t prefill_steps(const TargetModel& target, int64_t prompt_tokens) {
  const int64_t chunk = std::max<int64_t>(1, prefill_chunk(target, prompt_tokens));
  return (prompt_tokens + chunk - 1) / chunk;
}

StepOutput prefill(TargetModel& target, std::span<const int32_t> prompt, bool ids_only, const PrefillChunkHook& on_chunk) {
  const int64_t total = static_cast<int64_t>(prompt.size());
  const int64_t chunk = std::max<int64_t>(1, prefill_chunk(target, total));
  StepOutput out;
  for (int64_t start = 0; start < total; start += chunk) {
    const int64_t n = std::min(chunk, total - start);
    StepInput in;
    in.tokens.assign(prompt.begin() + start, prompt.begin() + start + n);
    in.positions.resize(static_cast<size_t>(n));
    std::iota(in.positions.begin(), in.positions.end(), static_cast<int32_t>(target.cache_length()));
    // Only the last chunk's logits are kept: earlier ones may skip them whatever the caller wants.
    in.ids_only = ids_only || start + n < total;
    StepOutput step = target.forward(in);
    std::vector<int32_t> keep(static_cast<size_t>(n));
    std::iota(keep.begin(), keep.end(), 0);
    target.commit(keep);
    if (on_chunk) on_chunk(in, step);
    if (out.captured.empty()) {
      for (const Matrix& m : step.captured) out.captured.emplace_back(total, m.cols);
    }
    for (size_t c = 0; c < step.captured.size() && c < out.captured.size(); ++c)
      std::copy(step.captured[c].data.begin(), step.captured[c].data.end(), out.captured[c].row(start));
    out.logits = std::move(step.logits);
    out.token_ids = std::move(step.token_ids);
  }
  return out;
}

}  // namespace kplan
