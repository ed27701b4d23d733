#pragma once
// Strided row copy with element type conversion: y[r, 0:COLS] = x[r, 0:COLS]. Materialises
// views the other kernels cannot read through strides (concat parts, slices into new buffers,
// f32 <-> bf16 conversions at the edges of a program).
//
// Template parameters: COLS (elements per row), X_DT, Y_DT element types, THREADS.
// Launch: grid (n_rows), block (THREADS).
// Arguments: x (row r at r * x_stride), y (row r at r * y_stride), n_rows, x_stride, y_stride.
#include "common.cuh"

namespace kp {

template <int COLS, int X_DT, int Y_DT, int THREADS>
__device__ void copy_rows(const void* x, void* y, int n_rows, int x_stride, int y_stride) {
  const int r = blockIdx.x;
  if (r >= n_rows) return;
  for (int c = threadIdx.x; c < COLS; c += THREADS) {
    store<Y_DT>(y, static_cast<i64>(r) * y_stride + c, load<X_DT>(x, static_cast<i64>(r) * x_stride + c));
  }
}

}  // namespace kp
