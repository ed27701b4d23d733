#pragma once
// Synthetic weights generated on the device at load (`kplan compile --synthetic-weights SEED`):
// writes one weight of the plan's weights table where its bytes would have been uploaded, with
// the values ir/support/synthetic_values.h defines (the CPU reference computes the same ones on
// the host). Not part of any step: runtime/gpu/synthetic_weights.cc launches it once per
// synthetic weight when the model loads.
//
// Template parameters:
//   KIND    0: normal-ish values, 1: compressed-tensors INT4 packed words, 2: their bf16 scales
//   OUT_DT  element type of a KIND 0 weight (0 = f32, 1 = bf16); 1 for KIND 2, 0 for KIND 1
//   GROUP   values per INT4 scale group (KIND 1, 2; a multiple of 8), 0 for KIND 0
//   FRAG_K  0: units in the plan's order; K (KIND 1, 2, GROUP 32): the weight's device copy is in
//           ir/support/int4_frag.h's order for rows of K columns, and unit i goes to its offset
//           there (the runtime uploads real weights in that order too, runtime/gpu/device_layout.h)
//   THREADS block size
// Launch: grid (any; the kernel strides over the units), block (THREADS).
// Arguments: out (the weight's device bytes), n_lo / n_hi (units to write, low and high 32 bits:
// elements for KIND 0, 32-bit words for KIND 1, groups for KIND 2), key_lo / key_hi (the weight's
// key, synthetic::weight_key(seed, stream)), mean and step (KIND 0: value = mean + z * step;
// KIND 1, 2: the virtual float weight's step, mean 0).
#include "common.cuh"
#include "int4_frag.h"
#include "synthetic_values.h"

namespace kp {

template <int KIND, int OUT_DT, int GROUP, int FRAG_K, int THREADS>
__device__ void synthetic_weights(void* out, int n_lo, int n_hi, int key_lo, int key_hi, float mean, float step) {
  namespace s = kplan::synthetic;
  namespace f = kplan::int4_frag;
  static_assert(KIND >= 0 && KIND <= 2, "KIND is 0, 1 or 2");
  static_assert(FRAG_K == 0 || (KIND != 0 && GROUP == 32 && FRAG_K % f::kSubColumns == 0), "FRAG_K: INT4 g32 rows of 128k columns");
  static_assert(KIND == 0 || (GROUP >= 8 && GROUP % 8 == 0 && GROUP <= s::kMaxGroup), "INT4 groups of 8k values");
  const unsigned long long n = (static_cast<unsigned long long>(static_cast<unsigned>(n_hi)) << 32) | static_cast<unsigned>(n_lo);
  const unsigned long long key = (static_cast<unsigned long long>(static_cast<unsigned>(key_hi)) << 32) | static_cast<unsigned>(key_lo);
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * THREADS;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * THREADS + threadIdx.x; i < n; i += stride) {
    if constexpr (KIND == 0) {
      store<OUT_DT>(out, static_cast<i64>(i), s::value(key, i, mean, step));
    } else if constexpr (KIND == 1) {
      // Word i lies in group i / (GROUP / 8): its scale first (the group's absmax), then 8 values.
      const float scale = s::from_bf16(s::int4_scale(key, i / (GROUP / 8), GROUP, step));
      static_cast<unsigned*>(out)[FRAG_K ? f::word_offset(static_cast<long long>(i), FRAG_K) : static_cast<long long>(i)] =
          s::int4_word(key, i, scale, step);
    } else {
      static_cast<unsigned short*>(out)[FRAG_K ? f::scale_offset(static_cast<long long>(i), FRAG_K) : static_cast<long long>(i)] =
          s::int4_scale(key, i, GROUP, step);
    }
  }
}

}  // namespace kp
