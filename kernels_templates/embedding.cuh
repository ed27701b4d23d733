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
  if constexpr (OUT_DT == BF16 && H % 8 == 0) {
    const uint4* src = reinterpret_cast<const uint4*>(row);
    uint4* dst = reinterpret_cast<uint4*>(static_cast<unsigned short*>(out) + static_cast<i64>(t) * H);
    for (int j = threadIdx.x; j < H / 8; j += THREADS) dst[j] = src[j];
  } else {
    for (int j = threadIdx.x; j < H; j += THREADS) {
      store<OUT_DT>(out, static_cast<i64>(t) * H + j, bf16_to_f32(row[j]));
    }
  }
}

}  // namespace kp
