#pragma once
// Element types shared by the checkpoint frontend, the IR and the plan.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kplan {

// U32 was appended (tree-mask words); keep new types at the end so stored codes stay valid.
enum class DType : uint8_t { F32, BF16, F16, F8E4M3, I64, I32, I8, U8, BOOL, U32 };

// Size of one element in bytes.
size_t dtype_size(DType t);
// IR text name: "f32", "bf16", "f16", "f8e4m3", "i64", "i32", "i8", "u8", "bool", "u32".
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// safetensors header names: "F32", "BF16", "F16", "F8_E4M3", "I64", "I32", "I8", "U8", "BOOL", "U32".
std::string_view dtype_safetensors_name(DType t);
std::optional<DType> dtype_from_safetensors_name(std::string_view name);

// Scalar conversions used by every backend (round-to-nearest-even for bf16).
float bf16_to_float(uint16_t v);
uint16_t float_to_bf16(float v);
float f16_to_float(uint16_t v);
uint16_t float_to_f16(float v);
float f8e4m3_to_float(uint8_t v);

// True for the float dtypes element_to_float reads: f32, bf16, f16, f8e4m3.
bool is_float_dtype(DType t);
// Element i of raw bytes of float dtype `t`, upcast to fp32 (memcpy: safe on the unaligned bytes
// of a mapped file). `t` must satisfy is_float_dtype.
float element_to_float(const uint8_t* bytes, DType t, size_t i);

// The index of the first NaN or infinity among `count` elements of a float dtype (is_float_dtype),
// or -1 when every element is finite. Checkpoints are scanned with it where they are read (a
// single NaN weight otherwise decodes as token 0 forever, with exit status 0).
int64_t first_non_finite(const uint8_t* bytes, DType t, size_t count);

}  // namespace kplan
