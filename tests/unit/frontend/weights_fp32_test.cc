// fp32 materialisation of checkpoint tensors: float upcasts and exact compressed-tensors INT4
// dequantisation, checked against hand-computed values and against the synth packer.
#include <gtest/gtest.h>

#include <cstring>

#include "compiler/frontend/int4_pack.h"
#include "compiler/frontend/safetensors.h"
#include "compiler/frontend/weights_fp32.h"
#include "ir/support/dtype.h"
#include "test_util.h"

namespace kplan {
namespace {

using namespace testing_util;

template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint16_t> bf16s(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) out.push_back(float_to_bf16(f));
  return out;
}

// A 2 x 16 INT4 module with 2 groups of 8, built by hand:
//   row 0: nibbles 0..15 -> values -8..7, scales [0.5, 2.0]
//   row 1: all nibbles 8 (value 0) except column 8 = 15 (value 7) and columns 9..15 = 0 (value
//          -8), scales [1.0, -0.25]
std::vector<TensorData> hand_module(const std::string& m) {
  std::vector<uint32_t> words = {0x76543210u, 0xFEDCBA98u, 0x88888888u, 0x0000000Fu};
  return {
      {m + ".weight_packed", DType::I32, {2, 2}, bytes_of(words)},
      {m + ".weight_scale", DType::BF16, {2, 2}, bytes_of(bf16s({0.5f, 2.0f, 1.0f, -0.25f}))},
      {m + ".weight_shape", DType::I32, {2}, bytes_of(std::vector<int32_t>{2, 16})},
  };
}

TEST(WeightsFp32, DequantisesHandPackedInt4) {
  TempDir dir("int4_hand");
  write_safetensors(dir.path() / "model.safetensors", hand_module("blk.experts.0.up_proj"));
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  ASSERT_TRUE(linear_is_int4(ckpt, "blk.experts.0.up_proj"));
  Fp32Tensor w = linear_weight_fp32(ckpt, "blk.experts.0.up_proj");
  ASSERT_EQ(w.shape, (std::vector<int64_t>{2, 16}));
  const float row0[16] = {-4, -3.5, -3, -2.5, -2, -1.5, -1, -0.5, 0, 2, 4, 6, 8, 10, 12, 14};
  const float row1[16] = {0, 0, 0, 0, 0, 0, 0, 0, -1.75, 2, 2, 2, 2, 2, 2, 2};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(w.data[c], row0[c]) << "row 0 col " << c;
    EXPECT_EQ(w.data[16 + c], row1[c]) << "row 1 col " << c;
  }
}

TEST(WeightsFp32, Int4AgreesWithTheSynthPacker) {
  const int64_t out = 5, in = 96;
  std::vector<float> w(out * in);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((static_cast<int>(i * 37 % 101) - 50)) / 64.0f;
  PackedInt4 p = pack_int4(w, out, in, 32);
  std::vector<float> expected = unpack_int4(p);
  TempDir dir("int4_synth");
  write_safetensors(dir.path() / "model.safetensors",
                    {{"e.weight_packed", DType::I32, {out, in / 8}, bytes_of(p.packed)},
                     {"e.weight_scale", DType::BF16, {out, in / 32}, bytes_of(p.scale)},
                     {"e.weight_shape", DType::I32, {2}, bytes_of(std::vector<int32_t>{5, 96})}});
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  Fp32Tensor got = linear_weight_fp32(ckpt, "e");
  ASSERT_EQ(got.shape, (std::vector<int64_t>{out, in}));
  for (int64_t r = 0; r < out; ++r)
    for (int64_t c = 0; c < in; ++c) {
      float scale = bf16_to_float(p.scale[r * 3 + c / 32]);
      EXPECT_EQ(got.data[r * in + c], static_cast<float>(unpacked_int4_value(p, r, c)) * scale);
      EXPECT_EQ(got.data[r * in + c], expected[r * in + c]);
    }
}

TEST(WeightsFp32, UpcastsFloatDtypes) {
  TempDir dir("upcast");
  write_safetensors(dir.path() / "model.safetensors",
                    {{"a.weight", DType::BF16, {1, 3}, bytes_of(bf16s({1.5f, -2.0f, 0.15625f}))},
                     {"b", DType::F16, {2}, bytes_of(std::vector<uint16_t>{0x3C00, 0xC000})},
                     {"c", DType::F8E4M3, {3}, {0x38, 0xC0, 0x00}},
                     {"d", DType::F32, {2}, bytes_of(std::vector<float>{3.25f, -1e-3f})},
                     {"i", DType::I32, {1}, bytes_of(std::vector<int32_t>{7})}});
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  Fp32Tensor a = linear_weight_fp32(ckpt, "a");
  EXPECT_FALSE(linear_is_int4(ckpt, "a"));
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(a.data, (std::vector<float>{1.5f, -2.0f, 0.15625f}));
  EXPECT_EQ(tensor_fp32(ckpt, "b").data, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(tensor_fp32(ckpt, "c").data, (std::vector<float>{1.0f, -2.0f, 0.0f}));
  EXPECT_EQ(tensor_fp32(ckpt, "d").data, (std::vector<float>{3.25f, -1e-3f}));
  expect_contains(error_of([&] { tensor_fp32(ckpt, "i"); }), {"tensor i", "not a floating-point type"});
  expect_contains(error_of([&] { linear_weight_fp32(ckpt, "nope"); }), {"nope.weight", "nope.weight_packed"});
}

TEST(WeightsFp32, RefusesInconsistentInt4Parts) {
  TempDir dir("int4_bad");
  auto parts = hand_module("m");
  parts[2].bytes = bytes_of(std::vector<int32_t>{2, 32});  // says in = 32, packed holds 16
  auto more = hand_module("n");
  more.pop_back();  // no weight_shape
  parts.insert(parts.end(), more.begin(), more.end());
  write_safetensors(dir.path() / "model.safetensors", parts);
  auto ckpt = SafetensorsCheckpoint::open(dir.path());
  expect_contains(error_of([&] { linear_weight_fp32(ckpt, "m"); }), {"m.weight_packed", "expected [2, 4]"});
  expect_contains(error_of([&] { linear_weight_fp32(ckpt, "n"); }), {"INT4 module n", "weight_shape"});
}

}  // namespace
}  // namespace kplan
