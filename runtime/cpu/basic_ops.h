#pragma once
// Elementwise and row-wise fp32 ops of the CPU reference backend (the interpreter's building
// blocks, and the reference other backends' kernels are checked against). Matrices are row-major
// [rows, cols] (kplan::Matrix); a weight W of a Linear layer is [out, in] as in the checkpoint,
// so a projection is x @ W^T. Dot products accumulate in double so the reference is at least as
// exact as the fp32 implementations it is compared against (in a fixed lane order: basic_ops.cc).
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/step_model.h"

namespace kplan::cpu {

// Rows of `table` [vocab, hidden] picked by token id. Throws kplan::Error for an id out of range.
Matrix embedding(const Matrix& table, std::span<const int32_t> ids);

// RMSNorm as transformers computes it: x * rsqrt(mean(x^2) + eps) in fp32, then times weight.
void rms_norm_row(const float* x, int64_t n, const float* weight, float eps, float* out);
// Row-wise RMSNorm of x [rows, n] with weight [n].
Matrix rms_norm(const Matrix& x, std::span<const float> weight, float eps);

// x [T, in] @ W^T with W [out, in] -> [T, out].
Matrix matmul(const Matrix& x, const Matrix& w);
// One row: out[o] = sum_i x[i] * w[o, i], w [rows, cols] row-major.
void matvec(const float* x, const float* w, int64_t rows, int64_t cols, float* out);
void matvec(const float* x, const Matrix& w, float* out);
// y [rows, out_dim] = x [rows, in_dim] @ w^T (w [out_dim, in_dim]); each row's values are
// bit-identical to matvec() of that row alone.
void matmul_rows(const float* x, int64_t rows, const float* w, int64_t out_dim, int64_t in_dim, float* y);

// a + b, elementwise (same shape).
Matrix add(const Matrix& a, const Matrix& b);

float silu(float x);
// silu(gate) * up, elementwise (same shape).
Matrix swiglu(const Matrix& gate, const Matrix& up);
// down(silu(gate(x)) * up(x)): the SwiGLU MLP of DeepSeek-V3 and Qwen3 (no biases).
Matrix swiglu_mlp(const Matrix& x, const Matrix& gate_w, const Matrix& up_w,
                  const Matrix& down_w);

// KV cache rows (ir/OPS.md): kv_append -> [S+T, D], rows of `cache` then each step row t as
// concat(parts[0][t], parts[1][t], ...); kv_compact -> [S+A, D], rows of `cache` then
// step[keep[i]]. Throw kplan::Error when widths do not fill a row or a keep index is outside the
// step. (A backend that updates its cache in place writes only the rows after S.)
Matrix kv_append(const Matrix& cache, const std::vector<const Matrix*>& parts);
Matrix kv_compact(const Matrix& cache, const Matrix& step, std::span<const int32_t> keep);

// Numerically stable softmax / log-softmax of one row, in place.
void softmax_inplace(float* x, int64_t n);
void log_softmax_inplace(float* x, int64_t n);
Matrix log_softmax(const Matrix& logits);

// Index of the largest value (the first one on ties, like torch.argmax).
int64_t argmax(const float* x, int64_t n);
// Indices of the k largest values, largest first (ties: lower index first).
std::vector<int64_t> top_k(const float* x, int64_t n, int64_t k);

}  // namespace kplan::cpu
