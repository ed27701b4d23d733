#pragma once
// The run-time float arguments of a kp::rope launch, from the IR rope op's attributes
// (ir/OPS.md "RoPE"): YaRN's correction range is computed here, on the host in double, once.
#include <cstdint>
#include <string>

namespace kplan::codegen {

struct RopeArgs {
  float theta = 10000.f;
  float yarn_factor = 1.f;   // 1: plain RoPE
  float yarn_low = 0.f;      // correction range (high already nudged when equal to low)
  float yarn_high = 1.f;
  float cos_sin_scale = 1.f; // the op's attention_factor
};

// dim: rotated width. scaling "none" ignores the yarn fields.
RopeArgs rope_args(int64_t dim, double theta, const std::string& scaling, double factor,
                   int64_t original_max_position_embeddings, double beta_fast, double beta_slow,
                   double attention_factor);

}  // namespace kplan::codegen
