#pragma once
// A synthetic weight's values on the host (`kplan compile --synthetic-weights`; plan_model.h
// SyntheticInit): ir/support/synthetic_values.h evaluated for every unit, bit for bit what the
// device's synthetic_weights kernel writes (runtime/gpu/synthetic_weights.h). The CPU
// reference's weight table reads synthetic weights through these.
#include <cstdint>
#include <vector>

#include "schemas/plan_model.h"

namespace kplan::cpu {

// The bytes of units [first, first + count) of `w` as the device holds them (f32 or bf16
// elements, int32 packed words, bf16 scales). Throws kplan::Error unless `w` is synthetic and
// the range lies inside it.
std::vector<uint8_t> synthetic_bytes(const plan::Weight& w, uint64_t first, uint64_t count);

// The whole weight: float values (a bf16 weight's rounded to bf16) for Normal and Int4Scale,
// int32 words for Int4Packed. Generated on every hardware thread.
std::vector<float> synthetic_floats(const plan::Weight& w);
std::vector<int32_t> synthetic_words(const plan::Weight& w);

}  // namespace kplan::cpu
