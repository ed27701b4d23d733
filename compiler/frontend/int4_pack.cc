#include "compiler/frontend/int4_pack.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "ir/support/int4.h"

namespace kplan {

PackedInt4 pack_int4(std::span<const float> weight, int64_t out, int64_t in, int64_t group_size) {
  if (out <= 0 || in <= 0 || group_size <= 0 || in % 8 != 0 || in % group_size != 0)
    throw Error("int4 pack: input dim " + std::to_string(in) + " must be a positive multiple of 8 and of group size " +
                std::to_string(group_size));
  if (static_cast<int64_t>(weight.size()) != out * in)
    throw Error("int4 pack: weight has " + std::to_string(weight.size()) + " values, expected " +
                std::to_string(out * in));
  PackedInt4 p;
  p.out = out;
  p.in = in;
  p.group_size = group_size;
  const int64_t groups = in / group_size;
  p.packed.assign(static_cast<size_t>(out * (in / 8)), 0);
  p.scale.resize(static_cast<size_t>(out * groups));
  for (int64_t r = 0; r < out; ++r) {
    const float* row = weight.data() + r * in;
    for (int64_t g = 0; g < groups; ++g) {
      float max_abs = 0.0f;
      for (int64_t c = g * group_size; c < (g + 1) * group_size; ++c)
        max_abs = std::max(max_abs, std::fabs(row[c]));
      // compressed-tensors clamps the scale to fp32 epsilon so an all-zero group stays finite.
      float scale = std::max(max_abs / 7.5f, FLT_EPSILON);
      uint16_t scale_bf16 = float_to_bf16(scale);
      p.scale[static_cast<size_t>(r * groups + g)] = scale_bf16;
      const float s = bf16_to_float(scale_bf16);
      for (int64_t c = g * group_size; c < (g + 1) * group_size; ++c) {
        float q = std::clamp(std::nearbyint(row[c] / s), -8.0f, 7.0f);  // FE_TONEAREST: half to even
        uint32_t& word = reinterpret_cast<uint32_t&>(p.packed[static_cast<size_t>(r * (in / 8) + c / 8)]);
        int4::set_value(word, c, static_cast<int>(q));
      }
    }
  }
  return p;
}

int unpacked_int4_value(const PackedInt4& p, int64_t r, int64_t c) {
  return int4::value(reinterpret_cast<const uint32_t*>(p.packed.data()) + r * (p.in / 8), c);
}

std::vector<float> unpack_int4(const PackedInt4& p) {
  std::vector<float> w(static_cast<size_t>(p.out * p.in));
  const int64_t groups = p.in / p.group_size;
  for (int64_t r = 0; r < p.out; ++r)
    for (int64_t c = 0; c < p.in; ++c)
      w[static_cast<size_t>(r * p.in + c)] =
          static_cast<float>(unpacked_int4_value(p, r, c)) *
          bf16_to_float(p.scale[static_cast<size_t>(r * groups + c / p.group_size)]);
  return w;
}

}  // namespace kplan
