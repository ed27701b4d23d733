#pragma once
// Warp-cooperative dot products of ONE weight row with up to NT activation rows; shared by the
// dense, INT4 and MoE matmul templates. Each lane accumulates a partial sum into acc[0..NT-1];
// the caller reduces across the warp (kp::warp_sum).
//
//   K       row length (the reduction dim), compile-time
//   X_DT    activation element type (kp::F32 / kp::BF16)
//   NT      activation rows handled at once (the token tile); rows >= nt are skipped
//   w_row   bf16 [K] (dot_bf16) or packed INT4 (dot_int4, see below)
//   x       activation row 0; row r starts x_stride elements after row r-1
#include "common.cuh"

namespace kp {

// bf16 weight row. When K % 8 == 0 and the row is 16-byte aligned (always, for whole weights;
// a sliced view may not be) each lane loads 8 weights at once.
template <int K, int X_DT, int NT>
__device__ __forceinline__ void dot_bf16(const void* w_row, const void* x, i64 x_stride, int nt,
                                         float acc[NT]) {
  const int lane = threadIdx.x % 32;
  if (K % 8 == 0 && (reinterpret_cast<unsigned long long>(w_row) & 15u) == 0) {
    for (int k = lane * 8; k < K; k += 32 * 8) {
      float w[8];
      load8_bf16(static_cast<const unsigned short*>(w_row) + k, w);
#pragma unroll
      for (int r = 0; r < NT; ++r) {
        if (r < nt) {
          float s = 0.f;
#pragma unroll
          for (int j = 0; j < 8; ++j) s += w[j] * load<X_DT>(x, r * x_stride + k + j);
          acc[r] += s;
        }
      }
    }
  } else {
    for (int k = lane; k < K; k += 32) {
      const float w = load<BF16>(w_row, k);
#pragma unroll
      for (int r = 0; r < NT; ++r) {
        if (r < nt) acc[r] += w * load<X_DT>(x, r * x_stride + k);
      }
    }
  }
}

// compressed-tensors pack-quantized INT4 row, group 32, symmetric (OPS matmul_int4):
//   w_packed int32 [K/8]: weight k is nibble (k % 8) of word k / 8, low nibble first, value q
//   in [0, 15] meaning q - 8; w_scale bf16 [K/32]. Dequantised weight = (q - 8) * scale in f32
// (exact, as the CPU reference computes it), so each group's dot product is taken with the
// integers and scaled once. Each lane takes whole groups (4 words = one 16-byte load).
template <int K, int X_DT, int NT>
__device__ __forceinline__ void dot_int4(const void* w_packed, const void* w_scale, const void* x,
                                         i64 x_stride, int nt, float acc[NT]) {
  static_assert(K % 32 == 0, "INT4 rows must hold whole groups of 32");
  const int lane = threadIdx.x % 32;
  for (int g = lane; g < K / 32; g += 32) {
    const uint4 q = static_cast<const uint4*>(w_packed)[g];
    const unsigned words[4] = {q.x, q.y, q.z, q.w};
    const float scale = load<BF16>(w_scale, g);
    float w[32];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) w[i * 8 + j] = static_cast<float>(static_cast<int>((words[i] >> (4 * j)) & 15u) - 8);
    }
#pragma unroll
    for (int r = 0; r < NT; ++r) {
      if (r < nt) {
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < 32; ++j) s += w[j] * load<X_DT>(x, r * x_stride + g * 32 + j);
        acc[r] += s * scale;
      }
    }
  }
}

}  // namespace kp
