#include "runtime/ddtree/prefill.h"

#include <chrono>
#include <numeric>
#include <vector>

namespace kplan {

StepOutput prefill(TargetModel& target, std::span<const int32_t> prompt) {
  StepInput in;
  in.tokens.assign(prompt.begin(), prompt.end());
  in.positions.resize(prompt.size());
  std::iota(in.positions.begin(), in.positions.end(), static_cast<int32_t>(target.cache_length()));
  StepOutput out = target.forward(in);
  std::vector<int32_t> keep(prompt.size());
  std::iota(keep.begin(), keep.end(), 0);
  target.commit(keep);
  return out;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kplan
