#pragma once
// Synthetic weights (`kplan compile --synthetic-weights SEED`): the values of a weight the plan
// records as "synthetic" instead of carrying its bytes, written once for every backend. The CPU
// reference (runtime/cpu/weight_table.cc) calls these on the host; the generation kernel
// (kernels_templates/synthetic_weights.cuh, NVRTC, launched at load by
// runtime/gpu/synthetic_weights.cc) calls the same functions on the device, so both hold the
// same bits. The compiler embeds this file beside the kernel templates (as
// "synthetic_values.h", compiler/codegen/embed_templates.cmake); it includes nothing.
//
// The generator is counter-based: element i of a weight is a pure function of
// (seed, stream, i) — splitmix64's finaliser over a per-weight key plus the counter — so any
// thread computes any element in any order. stream is the weight's id (the compiler hashes
// its name; the plan records the number). A value is "normal-ish": the Irwin-Hall sum of four
// 16-bit uniforms, centred, as an integer z in [-131070, 131070] (std 37837.227), then
//   value = (float)((double)mean + (double)z * (double)step),   step = stddev / 37837.227
// The double sum is exact (z has 18 bits, step and mean are floats whose magnitudes the plan
// validator keeps within 2^28 of each other, so the sum needs < 53 bits), hence a contracted
// fma and a separate multiply-add give the same double and the one rounding to float is the
// same everywhere. Output dtypes: f32 (that float), bf16 (it rounded to nearest even).
//
// INT4 (compressed-tensors pack-quantized, symmetric, ir/support/int4.h): the virtual float
// weight of the module (stream of its name, index over [experts, out, in] flat) is quantised
// per group of `group` consecutive values exactly as compiler/frontend/int4_pack.cc quantises a
// checkpoint: scale = max(absmax / 7.5f, FLT_EPSILON) rounded to bf16, q = clamp(rint(w / s),
// -8, 7), stored as q + 8, 8 per 32-bit word, first column in the low nibble. Word j of the
// packed weight and scale g of the scale weight are functions of one group each, so the two
// plan weights (same stream) agree with each other without either reading the other.

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define KPLAN_SYNTH_FN __host__ __device__ __forceinline__
#else
#include <cmath>
#include <cstring>
#define KPLAN_SYNTH_FN inline
#endif

namespace kplan::synthetic {

typedef unsigned long long u64;
typedef unsigned int u32;

// Distribution kinds (the plan's SyntheticKind, schemas/kplan.fbs, and the kernel's KIND).
enum : int { kNormal = 0, kInt4Packed = 1, kInt4Scale = 2 };

// The Irwin-Hall sum of four uniforms on [0, 65535]: centre and standard deviation.
constexpr long long kSumCentre = 2 * 65535;
constexpr double kSumStd = 37837.22723720648;  // sqrt((65536^2 - 1) / 3)
constexpr int kMaxGroup = 256;                  // the largest INT4 group this generator handles

// The step of a weight of standard deviation `stddev` (host side: the runtime passes it to the
// kernel, the CPU reference uses it directly, so the device never divides).
#if !defined(__CUDACC_RTC__)
inline float step_for(double stddev) { return static_cast<float>(stddev / kSumStd); }
#endif

// splitmix64's output function (Steele, Lea, Flood 2014).
KPLAN_SYNTH_FN u64 mix64(u64 z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One weight's key: its stream under the plan's seed.
KPLAN_SYNTH_FN u64 weight_key(u64 seed, u64 stream) { return mix64(seed ^ mix64(stream + 0x632BE59BD9B4E019ull)); }

// 64 random bits of element `index`.
KPLAN_SYNTH_FN u64 element_bits(u64 key, u64 index) { return mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull); }

// The centred integer z of element `index`: [-131070, 131070].
KPLAN_SYNTH_FN int centred_sum(u64 key, u64 index) {
  const u64 b = element_bits(key, index);
  const long long s = static_cast<long long>(b & 0xFFFFull) + static_cast<long long>((b >> 16) & 0xFFFFull) +
                      static_cast<long long>((b >> 32) & 0xFFFFull) + static_cast<long long>(b >> 48);
  return static_cast<int>(s - kSumCentre);
}

// The float value of element `index` (see the top of this file).
KPLAN_SYNTH_FN float value(u64 key, u64 index, float mean, float step) {
  const double v = static_cast<double>(mean) + static_cast<double>(centred_sum(key, index)) * static_cast<double>(step);
#if defined(__CUDA_ARCH__)
  return __double2float_rn(v);
#else
  return static_cast<float>(v);
#endif
}

// Bits of a float / to a float, both sides.
KPLAN_SYNTH_FN u32 float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
KPLAN_SYNTH_FN float bits_float(u32 u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// Round to nearest even (kplan::float_to_bf16; the values here are finite).
KPLAN_SYNTH_FN unsigned short to_bf16(float f) {
  u32 u = float_bits(f);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}
KPLAN_SYNTH_FN float from_bf16(unsigned short h) { return bits_float(static_cast<u32>(h) << 16); }

KPLAN_SYNTH_FN float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KPLAN_SYNTH_FN float round_even(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return std::nearbyint(x);  // FE_TONEAREST, as int4_pack.cc
#endif
}

// The bf16 scale of INT4 group g (values [g * group, (g + 1) * group) of the virtual weight).
KPLAN_SYNTH_FN unsigned short int4_scale(u64 key, u64 g, int group, float step) {
  float max_abs = 0.0f;
  for (int c = 0; c < group; ++c) {
    const float w = value(key, g * static_cast<u64>(group) + static_cast<u64>(c), 0.0f, step);
    const float a = w < 0.0f ? -w : w;
    max_abs = a > max_abs ? a : max_abs;
  }
  float scale = div_rn(max_abs, 7.5f);
  const float kEps = 1.1920928955078125e-07f;  // FLT_EPSILON (compressed-tensors' clamp)
  scale = scale > kEps ? scale : kEps;
  return to_bf16(scale);
}

// The signed value q (-8..7) of virtual element `index`, quantised with its group's bf16 scale.
KPLAN_SYNTH_FN int int4_value(u64 key, u64 index, float scale, float step) {
  float q = round_even(div_rn(value(key, index, 0.0f, step), scale));
  q = q < -8.0f ? -8.0f : (q > 7.0f ? 7.0f : q);
  return static_cast<int>(q);
}

// Packed word j (values 8j .. 8j+7; `scale` is the bf16 scale of their group, as a float).
KPLAN_SYNTH_FN u32 int4_word(u64 key, u64 j, float scale, float step) {
  u32 word = 0;
  for (int c = 0; c < 8; ++c)
    word |= static_cast<u32>(int4_value(key, 8 * j + static_cast<u64>(c), scale, step) + 8) << (4 * c);
  return word;
}

}  // namespace kplan::synthetic

#undef KPLAN_SYNTH_FN
