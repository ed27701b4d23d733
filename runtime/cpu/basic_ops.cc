#include "runtime/cpu/basic_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "ir/support/error.h"

namespace kplan::cpu {

Matrix embedding(const Matrix& table, std::span<const int32_t> ids) {
  Matrix out(static_cast<int64_t>(ids.size()), table.cols);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= table.rows)
      throw Error("token id " + std::to_string(ids[t]) + " is outside the vocabulary [0, " +
                  std::to_string(table.rows) + ")");
    std::copy_n(table.row(ids[t]), table.cols, out.row(static_cast<int64_t>(t)));
  }
  return out;
}

void rms_norm_row(const float* x, int64_t n, const float* weight, float eps, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  // transformers: variance in fp32, rsqrt(variance + eps), x * r, then weight * (that).
  const float variance = static_cast<float>(sum_sq / static_cast<double>(n));
  const float r = static_cast<float>(1.0 / std::sqrt(static_cast<double>(variance + eps)));
  for (int64_t i = 0; i < n; ++i) out[i] = weight[i] * (x[i] * r);
}

Matrix rms_norm(const Matrix& x, std::span<const float> weight, float eps) {
  if (static_cast<int64_t>(weight.size()) != x.cols)
    throw Error("rms_norm: weight has " + std::to_string(weight.size()) + " values for rows of " +
                std::to_string(x.cols));
  Matrix out(x.rows, x.cols);
  for (int64_t r = 0; r < x.rows; ++r) rms_norm_row(x.row(r), x.cols, weight.data(), eps, out.row(r));
  return out;
}

namespace {

// Every dot product of a projection sums x[i] * w[i] in double over kLanes interleaved lanes
// (lane = i % kLanes), folded in one fixed order. Independent lanes let the compiler vectorise and
// overlap the adds (one serial chain ran at a few hundred MFLOP/s), and the order is the same
// whether a row is projected alone (AR) or in a block of rows (a tree verify), so a row's result
// never depends on the other rows of its step: AR and DDTree see the same bits.
constexpr int64_t kLanes = 4;
constexpr int64_t kBlockRows = 4;  // rows of x that share each load of a weight row

float fold(const double* lanes) { return static_cast<float>((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])); }

float dot(const float* x, const float* w, int64_t n) {
  double a[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) a[l] += static_cast<double>(x[i + l]) * w[i + l];
  for (int64_t l = 0; i < n; ++i, ++l) a[l] += static_cast<double>(x[i]) * w[i];
  return fold(a);
}

// dot() of kBlockRows rows of x with one weight row, each row's lanes summed exactly as dot() does.
void dot_block(const float* const* x, const float* w, int64_t n, float* out) {
  double a[kBlockRows][kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t r = 0; r < kBlockRows; ++r)
      for (int64_t l = 0; l < kLanes; ++l) a[r][l] += static_cast<double>(x[r][i + l]) * w[i + l];
  for (int64_t l = 0; i < n; ++i, ++l)
    for (int64_t r = 0; r < kBlockRows; ++r) a[r][l] += static_cast<double>(x[r][i]) * w[i];
  for (int64_t r = 0; r < kBlockRows; ++r) out[r] = fold(a[r]);
}

}  // namespace

void matvec(const float* x, const float* w, int64_t rows, int64_t cols, float* out) {
  for (int64_t o = 0; o < rows; ++o) out[o] = dot(x, w + o * cols, cols);
}

void matvec(const float* x, const Matrix& w, float* out) {
  matvec(x, w.data.data(), w.rows, w.cols, out);
}

void matmul_rows(const float* x, int64_t rows, const float* w, int64_t out_dim, int64_t in_dim, float* y) {
  int64_t t = 0;
  for (; t + kBlockRows <= rows; t += kBlockRows) {
    const float* xs[kBlockRows];
    for (int64_t r = 0; r < kBlockRows; ++r) xs[r] = x + (t + r) * in_dim;
    float block[kBlockRows];
    for (int64_t o = 0; o < out_dim; ++o) {
      dot_block(xs, w + o * in_dim, in_dim, block);
      for (int64_t r = 0; r < kBlockRows; ++r) y[(t + r) * out_dim + o] = block[r];
    }
  }
  for (; t < rows; ++t) matvec(x + t * in_dim, w, out_dim, in_dim, y + t * out_dim);
}

Matrix matmul(const Matrix& x, const Matrix& w) {
  if (x.cols != w.cols)
    throw Error("matmul: input has " + std::to_string(x.cols) + " columns, weight expects " +
                std::to_string(w.cols));
  Matrix out(x.rows, w.rows);
  matmul_rows(x.data.data(), x.rows, w.data.data(), w.rows, w.cols, out.data.data());
  return out;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

Matrix swiglu(const Matrix& gate, const Matrix& up) {
  if (gate.rows != up.rows || gate.cols != up.cols) throw Error("swiglu: shapes differ");
  Matrix out(gate.rows, gate.cols);
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = silu(gate.data[i]) * up.data[i];
  return out;
}

Matrix add(const Matrix& a, const Matrix& b) {
  if (a.rows != b.rows || a.cols != b.cols) throw Error("add: shapes differ");
  Matrix out(a.rows, a.cols);
  for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = a.data[i] + b.data[i];
  return out;
}

Matrix kv_append(const Matrix& cache, const std::vector<const Matrix*>& parts) {
  const int64_t S = cache.rows, D = cache.cols, T = parts.empty() ? 0 : parts[0]->rows;
  Matrix out(S + T, D);
  std::copy(cache.data.begin(), cache.data.end(), out.data.begin());
  int64_t col = 0;
  for (const Matrix* p : parts) {
    if (p->rows != T) throw Error("kv_append: parts have different row counts");
    for (int64_t t = 0; t < T; ++t) std::copy_n(p->row(t), p->cols, out.row(S + t) + col);
    col += p->cols;
  }
  if (col != D) throw Error("kv_append: parts do not fill a cache row");
  return out;
}

Matrix kv_compact(const Matrix& cache, const Matrix& step, std::span<const int32_t> keep) {
  const int64_t S = cache.rows, D = cache.cols, A = static_cast<int64_t>(keep.size());
  if (step.cols != D) throw Error("kv_compact: step rows are not cache rows");
  Matrix out(S + A, D);
  std::copy(cache.data.begin(), cache.data.end(), out.data.begin());
  for (int64_t a = 0; a < A; ++a) {
    if (keep[a] < 0 || keep[a] >= step.rows)
      throw Error("kv_compact: keep index " + std::to_string(keep[a]) + " outside the step");
    std::copy_n(step.row(keep[a]), D, out.row(S + a));
  }
  return out;
}

Matrix swiglu_mlp(const Matrix& x, const Matrix& gate_w, const Matrix& up_w,
                  const Matrix& down_w) {
  return matmul(swiglu(matmul(x, gate_w), matmul(x, up_w)), down_w);
}

void softmax_inplace(float* x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - m) / sum);
}

void log_softmax_inplace(float* x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
  const double log_z = m + std::log(sum);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] - log_z);
}

Matrix log_softmax(const Matrix& logits) {
  Matrix out = logits;
  for (int64_t r = 0; r < out.rows; ++r) log_softmax_inplace(out.row(r), out.cols);
  return out;
}

int64_t argmax(const float* x, int64_t n) {
  return std::max_element(x, x + n) - x;  // first maximum, as torch.argmax
}

std::vector<int64_t> top_k(const float* x, int64_t n, int64_t k) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [x](int64_t a, int64_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  idx.resize(static_cast<size_t>(k));
  return idx;
}

}  // namespace kplan::cpu
