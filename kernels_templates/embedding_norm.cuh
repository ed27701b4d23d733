#pragma once
// A step's first two ops in one launch (compiler/passes/embedding_norm.h fuses them; each is the
// OPS op of the same name, the arithmetic of embedding.cuh and rms_norm.cuh):
//   out = embedding(ids, table)                  (the residual stream's start, for its add)
//   y   = rms_norm(out, weight, eps)             (the first layer's input norm)
// A 1-token step's gather and norm are ~2-3 us of launch each inside its CUDA graph for ~30 KiB
// of work: block t reads token t's table row once, stores it to out (exact: the table is bf16)
// and normalises it from registers.
//
// Template parameters:
//   H        hidden size (the table's and the norm's row length)
//   OUT_DT   element type of out (kp::F32 or kp::BF16)
//   Y_DT     element type of y
//   THREADS  threads per block
// Launch: grid (n_tokens), block (THREADS).
// Arguments:
//   ids       int32 [n_tokens]; clamped to [0, vocab) as embedding.cuh does
//   table     bf16 [vocab, H]
//   out       OUT_DT [n_tokens, H], contiguous
//   weight    bf16 [H], the norm's
//   y         Y_DT [n_tokens, H], contiguous
//   n_tokens, vocab, eps
#include "rms_norm.cuh"

namespace kp {

template <int H, int OUT_DT, int Y_DT, int THREADS>
__device__ void embedding_rms_norm(const void* ids, const void* table, void* out, const void* weight, void* y, int n_tokens, int vocab,
                                   float eps) {
  constexpr int PER_THREAD = (H + THREADS - 1) / THREADS;
  const int t = blockIdx.x;
  if (t >= n_tokens) return;
  const int id = clamp_int(static_cast<const int*>(ids)[t], 0, vocab - 1);
  const i64 o = static_cast<i64>(t) * H;
  float v[PER_THREAD], g[PER_THREAD];
  const float ss = rms_norm_load<H, BF16, THREADS>(table, static_cast<i64>(id) * H, weight, v, g);
  store_row_and_norm<H, OUT_DT, Y_DT, THREADS>(ss, v, g, out, y, o, eps);
}

}  // namespace kp
