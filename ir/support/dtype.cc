#include "ir/support/dtype.h"

#include <cmath>
#include <cstring>

namespace kplan {

namespace {
struct DTypeInfo {
  DType type;
  size_t size;
  std::string_view ir_name;
  std::string_view st_name;
};
constexpr DTypeInfo kInfos[] = {
    {DType::F32, 4, "f32", "F32"},         {DType::BF16, 2, "bf16", "BF16"},
    {DType::F16, 2, "f16", "F16"},         {DType::F8E4M3, 1, "f8e4m3", "F8_E4M3"},
    {DType::I64, 8, "i64", "I64"},         {DType::I32, 4, "i32", "I32"},
    {DType::I8, 1, "i8", "I8"},            {DType::U8, 1, "u8", "U8"},
    {DType::BOOL, 1, "bool", "BOOL"},      {DType::U32, 4, "u32", "U32"},
};
const DTypeInfo& info(DType t) { return kInfos[static_cast<int>(t)]; }
}  // namespace

size_t dtype_size(DType t) { return info(t).size; }
std::string_view dtype_name(DType t) { return info(t).ir_name; }
std::string_view dtype_safetensors_name(DType t) { return info(t).st_name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.ir_name == name) return i.type;
  return std::nullopt;
}
std::optional<DType> dtype_from_safetensors_name(std::string_view name) {
  for (const auto& i : kInfos)
    if (i.st_name == name) return i.type;
  return std::nullopt;
}

float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) return 0x7fc0;
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float value;
  if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    value = mant ? NAN : INFINITY;
  else
    value = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -value : value;
}

uint16_t float_to_f16(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  if (std::isnan(v)) return static_cast<uint16_t>(sign | 0x7e00);
  float a = std::fabs(v);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < std::ldexp(1.0f, -14)) {  // subnormal: round to a multiple of 2^-24
    uint32_t m = static_cast<uint32_t>(std::nearbyint(a * std::ldexp(1.0f, 24)));
    return static_cast<uint16_t>(sign | m);
  }
  int e;
  float frac = std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  uint32_t m = static_cast<uint32_t>(std::nearbyint((frac * 2.0f - 1.0f) * 1024.0f));
  int exp = e - 1 + 15;
  if (m == 1024) { m = 0; ++exp; }
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (exp << 10) | m);
}

float f8e4m3_to_float(uint8_t v) {
  uint32_t sign = v >> 7, exp = (v >> 3) & 0xf, mant = v & 7;
  float value;
  if (exp == 15 && mant == 7)
    value = NAN;
  else if (exp == 0)
    value = std::ldexp(static_cast<float>(mant), -9);
  else
    value = std::ldexp(static_cast<float>(mant | 8), static_cast<int>(exp) - 10);
  return sign ? -value : value;
}

bool is_float_dtype(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16 || t == DType::F8E4M3;
}

float element_to_float(const uint8_t* p, DType t, size_t i) {
  switch (t) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return bf16_to_float(v);
    }
    case DType::F16: {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return f16_to_float(v);
    }
    default:
      return f8e4m3_to_float(p[i]);
  }
}

int64_t first_non_finite(const uint8_t* p, DType t, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    switch (t) {
      case DType::BF16:
      case DType::F16: {
        uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        const uint16_t exponent = t == DType::BF16 ? 0x7F80 : 0x7C00;
        if ((v & exponent) == exponent) return static_cast<int64_t>(i);
        break;
      }
      default:
        if (!std::isfinite(element_to_float(p, t, i))) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

}  // namespace kplan
