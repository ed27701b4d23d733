// compressed-tensors pack-quantized INT4: hand-computed packing, scales and round trips.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/frontend/int4_pack.h"
#include "ir/support/dtype.h"
#include "tests/unit/frontend/test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

TEST(Int4Pack, HandComputedGroup) {
  // One row, one group of 32: max|w| = 7.5 gives scale exactly 1.0 (7.5 / 7.5, bf16-exact).
  std::vector<float> w(32, 0.0f);
  w[0] = 1.0f;    // q 1  -> nibble 9
  w[1] = -1.0f;   // q -1 -> nibble 7
  w[2] = 7.5f;    // 7.5 rounds to 8 (half to even), clamped to 7 -> nibble 15
  w[3] = -7.5f;   // -8 -> nibble 0
  w[4] = 2.5f;    // half to even: 2 -> nibble 10
  w[5] = 3.5f;    // half to even: 4 -> nibble 12
  w[6] = -0.4f;   // 0 -> nibble 8
  w[7] = 6.6f;    // 7 -> nibble 15
  w[8] = -3.2f;   // -3 -> nibble 5 (first value of the second int32)
  PackedInt4 p = pack_int4(w, 1, 32);
  ASSERT_EQ(p.packed.size(), 4u);
  ASSERT_EQ(p.scale.size(), 1u);
  EXPECT_EQ(bf16_to_float(p.scale[0]), 1.0f);
  // Nibbles low first: 9, 7, 15, 0, 10, 12, 8, 15 -> 0xF8CA0F79.
  EXPECT_EQ(static_cast<uint32_t>(p.packed[0]), 0xF8CA0F79u);
  // 5 then seven zeros stored as 8.
  EXPECT_EQ(static_cast<uint32_t>(p.packed[1]), 0x88888885u);
  EXPECT_EQ(static_cast<uint32_t>(p.packed[2]), 0x88888888u);
  std::vector<float> back = unpack_int4(p);
  const float expected[9] = {1, -1, 7, -8, 2, 4, 0, 7, -3};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(back[i], expected[i]) << i;
  EXPECT_EQ(unpacked_int4_value(p, 0, 3), -8);
}

TEST(Int4Pack, ScaleIsRoundedToBf16BeforeQuantising) {
  // max|w| = 1.0: scale 1/7.5 = 0.1333.. is not a bf16; the stored scale is its bf16 rounding
  // and values are quantised against that, so dequant = q * stored scale exactly.
  std::vector<float> w(64);
  for (int i = 0; i < 64; ++i) w[i] = std::sin(0.37f * static_cast<float>(i));  // |w| <= 1
  w[5] = 1.0f;
  w[40] = -0.25f;  // the second group has its own, smaller scale
  for (int i = 32; i < 64; ++i) w[i] *= 0.25f;
  PackedInt4 p = pack_int4(w, 2, 32);  // two rows of 32: a group per row
  const float s0 = bf16_to_float(p.scale[0]);
  EXPECT_EQ(p.scale[0], float_to_bf16(1.0f / 7.5f));
  EXPECT_LT(bf16_to_float(p.scale[1]), s0);
  std::vector<float> back = unpack_int4(p);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 32; ++c) {
      const float s = bf16_to_float(p.scale[r]);
      const float q = back[r * 32 + c] / s;
      EXPECT_EQ(q, std::nearbyint(q)) << "dequantised value is an integer times the scale";
      // Half a step, plus what clamping costs when the bf16 scale rounded down (7.5 * 2^-8 s).
      EXPECT_LE(std::fabs(back[r * 32 + c] - w[r * 32 + c]), 0.53f * s) << r << "," << c;
    }
}

TEST(Int4Pack, MultipleRowsAndGroups) {
  // [3, 64]: 8 int32 per row, 2 groups per row; row-major layout.
  std::vector<float> w(3 * 64, 0.0f);
  w[1 * 64 + 33] = 3.0f;  // row 1, group 1: scale 0.4, q = 7
  PackedInt4 p = pack_int4(w, 3, 64);
  ASSERT_EQ(p.packed.size(), 3u * 8u);
  ASSERT_EQ(p.scale.size(), 3u * 2u);
  EXPECT_EQ(p.scale[1 * 2 + 1], float_to_bf16(0.4f));
  // Column 33 is nibble 1 of int32 4 of row 1.
  EXPECT_EQ((static_cast<uint32_t>(p.packed[1 * 8 + 4]) >> 4) & 0xF, 15u);
  EXPECT_EQ(unpacked_int4_value(p, 1, 33), 7);
  // An all-zero group gets a tiny positive scale (compressed-tensors clamps to fp32 eps), q 0.
  EXPECT_GT(bf16_to_float(p.scale[0]), 0.0f);
  EXPECT_EQ(unpacked_int4_value(p, 0, 0), 0);
}

TEST(Int4Pack, RefusesBadShapes) {
  std::vector<float> w(30);
  expect_contains(error_of([&] { pack_int4(w, 1, 30); }), {"multiple of 8"});
  std::vector<float> w2(64);
  expect_contains(error_of([&] { pack_int4(w2, 1, 32); }), {"64 values"});
}

}  // namespace
}  // namespace kplan
