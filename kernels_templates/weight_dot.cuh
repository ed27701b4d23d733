#pragma once
// Weight-streaming helpers of the dense matmul (16-byte loads that bypass L1, bf16 unpacking,
// activation vectors), then warp-cooperative dot products of ONE weight row with up to NT
// activation rows, shared by the INT4 and MoE matmul templates. Each lane accumulates a partial
// sum into acc[0..NT-1]; the caller reduces across the warp (kp::warp_sum).
//
//   K       row length (the reduction dim), compile-time
//   X_DT    activation element type (kp::F32 / kp::BF16)
//   NT      activation rows handled at once (the token tile); rows >= nt are skipped
//   w_row   bf16 [K] (dot_bf16) or packed INT4 (dot_int4, see below)
//   x       activation row 0; row r starts x_stride elements after row r-1
#include "common.cuh"

namespace kp {

// A 16-byte load of weights read once per step: through the non-coherent path, not allocated in
// L1 (which keeps the activations the same warp reads again). p must be 16-byte aligned.
__device__ __forceinline__ uint4 ldg_stream16(const void* p) {
#ifdef KP_HOST_SHIM  // the host tests (tests/unit/codegen/cuda_host_shim.h)
  return __ldcs(static_cast<const uint4*>(p));
#else
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
#endif
}

__device__ __forceinline__ uint4 zero_uint4() {
  uint4 v;
  v.x = v.y = v.z = v.w = 0u;
  return v;
}

// Activations x[i .. i + 8) as f32: VEC, 16-byte loads (x + i 16-byte aligned), else one by one.
template <int X_DT, bool VEC>
__device__ __forceinline__ void load8_x(const void* x, i64 i, float out[8]) {
  if constexpr (VEC && X_DT == F32) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + i + 4);
    out[0] = a.x; out[1] = a.y; out[2] = a.z; out[3] = a.w;
    out[4] = b.x; out[5] = b.y; out[6] = b.z; out[7] = b.w;
  } else if constexpr (VEC) {
    unpack8_bf16(*reinterpret_cast<const uint4*>(static_cast<const unsigned short*>(x) + i), out);
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = load<X_DT>(x, i + j);
  }
}

// Two f32 as a bf16x2 word (a in the low half), rounded to nearest even.
__device__ __forceinline__ unsigned pack_bf16x2(float a, float b) {
  return static_cast<unsigned>(f32_to_bf16(a)) | (static_cast<unsigned>(f32_to_bf16(b)) << 16);
}

// The residual of f32 v after rounding to bf16: v == hi + lo up to 2^-16 of |v|.
__device__ __forceinline__ float bf16_residual(float v) { return v - bf16_to_f32(f32_to_bf16(v)); }

// d += a * b on the tensor cores: A 16x16 bf16 (row), B 16x8 bf16 (col), D 16x8 f32 (sm_80+); on
// the host shim (CPU tests) its emulation of the same fragments (tests/unit/codegen/cuda_host_shim.h).
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#ifdef KP_HOST_SHIM
  ::kplan::cuda_host::mma_m16n8k16_bf16(d, a, b0, b1);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

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
