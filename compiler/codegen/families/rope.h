#pragma once
// Kernel family rope: kernels_templates/rope.cuh (kp::rope).
// Rotary position embedding with optional YaRN scaling, on ROPE_DIM-wide slices of [n_tokens, HEADS, *] rows.
//
// Template parameters (compile-time constants, template order):
//   ROPE_DIM, HEADS, INTERLEAVED, X_DT (dtype), Y_DT (dtype), THREADS (tuning)
// See the template's doc block for their meaning and the launch geometry (families/rope.cc).
#include <cstdint>
#include <string_view>

#include "compiler/codegen/families/family.h"

namespace kplan::codegen::rope {

// Launch arguments, in the kernel's parameter order.
struct Args {
  KPLAN_PTR(x);              // slice (t, h) at t * x_row_stride + h * x_head_stride
  KPLAN_PTR(y);              // slice (t, h) at t * y_row_stride + h * y_head_stride (may alias x)
  KPLAN_PTR(positions);      // int32 [n_tokens] position ids
  KPLAN_I32(n_tokens);       // tokens (= grid.x)
  KPLAN_I32(x_row_stride);   // elements
  KPLAN_I32(x_head_stride);  // elements
  KPLAN_I32(y_row_stride);   // elements
  KPLAN_I32(y_head_stride);  // elements
  KPLAN_F32(theta);          // RoPE base
  KPLAN_F32(yarn_factor);    // 1: plain RoPE
  KPLAN_F32(yarn_low);       // YaRN correction range low
  KPLAN_F32(yarn_high);      // YaRN correction range high (nudged when equal to low)
  KPLAN_F32(cos_sin_scale);  // the op's attention_factor
};

const Family& family();

}  // namespace kplan::codegen::rope

namespace kplan::codegen {

// Heads a block rotates, about a rope pair a thread, 1..max(heads, 1): the host twin of
// kp::rope_heads_per_block (rope.cuh is device code), for the rope and mla_rope_append grids.
int64_t rope_heads_per_block(int64_t rope_dim, int64_t heads, int64_t threads);

// The instance for these problem constants (tuning from heuristics/<arch>.cc).
KernelSource rope_kernel(int64_t rope_dim, int64_t heads, bool interleaved, ElemType x, ElemType y,
                         std::string_view arch = kDefaultArch);

}  // namespace kplan::codegen
