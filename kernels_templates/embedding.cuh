#pragma once
// Embedding gather: out[t, :] = table[ids[t], :].
//
// Template parameters (compile-time):
//   H        hidden size (row length of the table)
//   OUT_DT   element type of out (kp::F32 or kp::BF16); the table is bf16
//   THREADS  threads per block
// Launch: grid (n_tokens), block (THREADS).
// Arguments:
//   ids       int32 [n_tokens]; out-of-range ids are clamped to [0, vocab) so a graph warm-up on
//             garbage input stays in bounds
//   table     bf16 [vocab, H]
//   out       OUT_DT [n_tokens, H], contiguous
//   n_tokens  rows to gather
//   vocab     rows in table
#include "common.cuh"

namespace kp {

template <int H, int OUT_DT, int THREADS>
__device__ void embedding(const void* ids, const void* table, void* out, int n_tokens, int vocab) {
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  const int id = clamp_int(static_cast<const int*>(ids)[t], 0, vocab - 1);
  const unsigned short* row = static_cast<const unsigned short*>(table) + static_cast<i64>(id) * H;
  if constexpr (H % 8 == 0) {
    // Every 16-byte load of the row issued before any store (a store may alias the table for the
    // compiler, so a load-store loop runs one round trip at a time: 33 us for K2.6's f32 row).
    constexpr int CH = (H / 8 + THREADS - 1) / THREADS;
    const uint4* src = reinterpret_cast<const uint4*>(row);
    uint4 v[CH];
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int j = threadIdx.x + c * THREADS;
      v[c] = src[j < H / 8 ? j : H / 8 - 1];
    }
#pragma unroll
    for (int c = 0; c < CH; ++c) {
      const int j = threadIdx.x + c * THREADS;
      if (j >= H / 8) continue;
      if constexpr (OUT_DT == BF16) {
        reinterpret_cast<uint4*>(static_cast<unsigned short*>(out) + static_cast<i64>(t) * H)[j] = v[c];
      } else {
        float f[8];
        unpack8_bf16(v[c], f);
#pragma unroll
        for (int e = 0; e < 8; ++e) store<OUT_DT>(out, static_cast<i64>(t) * H + 8 * j + e, f[e]);
      }
    }
  } else {
    for (int j = threadIdx.x; j < H; j += THREADS) {
      store<OUT_DT>(out, static_cast<i64>(t) * H + j, bf16_to_f32(row[j]));
    }
  }
}

}  // namespace kp
