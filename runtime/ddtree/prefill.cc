#include "runtime/ddtree/prefill.h"

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

}  // namespace kplan
