#pragma once
// The random values of each synthetic tensor, chosen so a tiny model is a useful test subject:
// every sublayer moves the residual stream by about as much as the embedding (so a bug in any
// of them shows in the logits), routing differs from token to token, and logits are spread
// widely enough that greedy decoding has no near-ties between fp32 implementations.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/tensor_spec.h"

namespace kplan {

// How one tensor's values are drawn: mean + stddev * N(0, 1).
struct InitRule {
  double mean = 0.0;
  double stddev = 0.0;
};
// `name` is a checkpoint tensor name (prefix included or not); `shape` its unpacked shape.
InitRule init_rule(const std::string& name, const std::vector<int64_t>& shape);

// fp32 values of one weight, drawn from the stream named `stream_name` (a tensor name) under
// `seed`. The same (seed, name) always gives the same values on every machine.
std::vector<float> synth_values(uint64_t seed, const std::string& stream_name,
                                const std::vector<int64_t>& shape);

}  // namespace kplan
