#pragma once
// One function per kernel family: gather the launch's operands through the strides and offsets
// it carries, compute with the runtime/cpu op of the IR op the family implements, scatter the
// result back. What is written here is only what the template's doc block says about addressing
// (strides, clamped indices, in-place rows); the math is the CPU reference's.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

#include "emulator_launch.h"
#include "ir/support/tree_mask.h"
#include "ir/support/yarn.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_attention.h"
#include "runtime/cpu/mla_attention.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/step_mask.h"

namespace kplan::codegen::testing_util::families {

inline int32_t clamp_index(int64_t v, int64_t n) { return static_cast<int32_t>(std::clamp<int64_t>(v, 0, n - 1)); }

inline void embedding(LaunchArgs& a) {
  const int64_t H = a.param("H"), n = a.i32("n_tokens"), vocab = a.i32("vocab");
  std::vector<int32_t> ids = a.gather_i32("ids", n);
  for (int32_t& id : ids) id = clamp_index(id, vocab);  // the kernel clamps; the CPU op refuses
  const Matrix table = a.gather_rows("table", vocab, H, H, DType::BF16);
  a.scatter_rows("out", H, a.dtype_param("OUT_DT"), cpu::embedding(table, ids));
}

inline void rms_norm(LaunchArgs& a) {
  const int64_t D = a.param("D"), n = a.i32("n_rows");
  const Matrix x = a.gather_rows("x", n, D, a.i32("x_stride"), a.dtype_param("X_DT"));
  const Matrix w = a.gather_rows("weight", 1, D, D, DType::BF16);
  a.scatter_rows("y", a.i32("y_stride"), a.dtype_param("Y_DT"), cpu::rms_norm(x, w.data, a.f32("eps")));
}

// The gather and the first norm in one launch (embedding_norm.cuh): out = the table's rows (clamped
// ids), y = rms_norm of those rows (read as gathered, before out's rounding: exact for bf16 out).
inline void embedding_norm(LaunchArgs& a) {
  const int64_t H = a.param("H"), n = a.i32("n_tokens"), vocab = a.i32("vocab");
  std::vector<int32_t> ids = a.gather_i32("ids", n);
  for (int32_t& id : ids) id = clamp_index(id, vocab);
  const Matrix rows = cpu::embedding(a.gather_rows("table", vocab, H, H, DType::BF16), ids);
  const Matrix w = a.gather_rows("weight", 1, H, H, DType::BF16);
  a.scatter_rows("out", H, a.dtype_param("OUT_DT"), rows);
  a.scatter_rows("y", H, a.dtype_param("Y_DT"), cpu::rms_norm(rows, w.data, a.f32("eps")));
}

// NORM 1 / 2 (the matmul templates' fused norm): the launch's x rows are rms_norm(x, norm_weight),
// and with NORM 2 those rows are written to norm_out in X_DT ([n_tokens, K], contiguous); NORM 3:
// rms_norm(x) rounded to bf16, as the norm launch stores the rows.
inline Matrix matmul_activations(LaunchArgs& a, int64_t K, int64_t n, int64_t batch_offset) {
  const Matrix x = a.gather_rows("x", n, K, a.i32("x_row_stride"), a.dtype_param("X_DT"), batch_offset);
  if (a.param("NORM") == 0) return x;
  const Matrix w = a.gather_rows("norm_weight", 1, K, K, DType::BF16);
  Matrix normed = cpu::rms_norm(x, w.data, a.f32("eps"));
  if (a.param("NORM") == 2) a.scatter_rows("norm_out", K, a.dtype_param("X_DT"), normed);
  if (a.param("NORM") == 3)
    for (float& v : normed.data) v = bf16_to_float(float_to_bf16(v));
  return normed;
}

// Batched over grid.z (the heads of head_matmul); W_LAYOUT 1 reads W[b] as [K, N].
inline void matmul(LaunchArgs& a) {
  const int64_t K = a.param("K"), N = a.param("N"), n = a.i32("n_tokens"), batch = a.launch().grid[2];
  const bool kn = a.param("W_LAYOUT") == 1;
  for (int64_t b = 0; b < batch; ++b) {
    const Matrix x = matmul_activations(a, K, n, b * a.i32("x_batch_stride"));
    const int64_t wb = b * a.i32("w_batch_stride");
    const Matrix w = a.gather("w", kn ? Strided{N, K, 1, 1, 0, N, wb} : Strided{N, K, K, 1, 0, 1, wb}, DType::BF16);
    Matrix y = cpu::matmul(x, w);
    if (const int64_t routed = a.param("ROUTED"); routed > 0) {  // the MoE combine: the pairs' rows summed, then x W^T
      const Matrix pairs = a.gather_rows("routed", n * routed, N, N, DType::F32);
      Matrix sum(n, N);
      for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < routed; ++r)
          for (int64_t j = 0; j < N; ++j) sum.row(t)[j] += pairs.row(t * routed + r)[j];
      y = cpu::add(sum, y);
    }
    if (a.param("ACC") != 0)  // the fused residual add: residual (may be y itself) + x W^T
      y = cpu::add(a.gather_rows("residual", n, N, a.i32("y_row_stride"), a.dtype_param("Y_DT"), b * a.i32("y_batch_stride")), y);
    a.scatter_rows("y", a.i32("y_row_stride"), a.dtype_param("Y_DT"), y, false, b * a.i32("y_batch_stride"));
  }
}

// The cuBLASLt call (compiler/codegen/families/cublaslt_matmul.h): y = x W^T (+ residual), bf16 x
// and W, f32 sums, y in Y_DT.
inline void cublaslt_matmul(LaunchArgs& a) {
  const int64_t K = a.param("K"), N = a.param("N"), n = a.i32("n_tokens");
  const Matrix x = a.gather_rows("x", n, K, a.i32("x_row_stride"), DType::BF16);
  const Matrix w = a.gather_rows("w", N, K, K, DType::BF16);
  Matrix y = cpu::matmul(x, w);
  if (a.param("ACC") != 0) y = cpu::add(a.gather_rows("residual", n, N, a.i32("y_row_stride"), a.dtype_param("Y_DT")), y);
  a.scatter_rows("y", a.i32("y_row_stride"), a.dtype_param("Y_DT"), y);
}

// The top-K routing of these logits rows (E = their width) with the launch's bias and
// routed_scaling arguments, written to its topk_ids and topk_weights.
inline void write_routing(LaunchArgs& a, const Matrix& logits, int64_t K, int64_t n_group, int64_t topk_group, bool norm) {
  const int64_t E = logits.cols;
  const Matrix bias = a.gather_rows("bias", 1, E, E, DType::F32);
  const cpu::Routing r = cpu::moe_route_logits(logits, bias.data, cpu::RouterParams{E, K, n_group, topk_group, norm, a.f32("routed_scaling")});
  a.scatter_i32("topk_ids", r.experts);
  Matrix w(logits.rows, K);
  w.data = r.weights;
  a.scatter_rows("topk_weights", K, DType::F32, w);
}

// Each sibling's rows: y_i = x W_i^T (kernels_templates/matmul_siblings.cuh); GLU 1: y2 =
// silu(x W2^T) * (x W3^T), gate and up rounded to Y_DT first, y3 unwritten, W (N may be 0) a
// plain sibling; NORM as matmul's; YA_F32 1: y is f32; ROUTE_K: the router's ids and weights from y.
inline void matmul_siblings(LaunchArgs& a) {
  const int64_t K = a.param("K"), n = a.i32("n_tokens");
  const Matrix x = matmul_activations(a, K, n, 0);
  auto product = [&](const char* w, int64_t rows) { return cpu::matmul(x, a.gather(w, Strided{rows, K, K, 1, 0, 1, 0}, DType::BF16)); };
  const DType y_dt = a.param("YA_F32") == 1 ? DType::F32 : a.dtype_param("Y_DT");
  if (a.param("GLU") == 1) {
    const int64_t N = a.param("N"), M = a.param("N2");
    if (N > 0) {
      const Matrix logits = product("w", N);
      a.scatter_rows("y", a.i32("y_row_stride"), y_dt, logits);
      // The router's ids and weights from these f32 logits (ungrouped).
      if (const int64_t k = a.param("ROUTE_K"); k > 0) write_routing(a, logits, k, 1, 1, a.param("RNORM") != 0);
    }
    Matrix gate = product("w2", M), up = product("w3", M);
    if (a.dtype_param("Y_DT") == DType::BF16)
      for (Matrix* m : {&gate, &up})
        for (float& v : m->data) v = bf16_to_float(float_to_bf16(v));
    a.scatter_rows("y2", a.i32("y2_row_stride"), a.dtype_param("Y_DT"), cpu::swiglu(gate, up));
    return;
  }
  const struct { const char *w, *y, *stride, *rows; } siblings[] = {{"w", "y", "y_row_stride", "N"}, {"w2", "y2", "y2_row_stride", "N2"},
                                                                  {"w3", "y3", "y3_row_stride", "N3"}};
  for (const auto& s : siblings) {
    const int64_t N = a.param(s.rows);
    if (N == 0) continue;
    a.scatter_rows(s.y, a.i32(s.stride), s.y == std::string_view("y") ? y_dt : a.dtype_param("Y_DT"), product(s.w, N));
  }
}

inline void matmul_int4(LaunchArgs& a) {
  const int64_t K = a.param("K"), N = a.param("N"), n = a.i32("n_tokens");
  const Matrix x = a.gather_rows("x", n, K, a.i32("x_row_stride"), a.dtype_param("X_DT"));
  a.scatter_rows("y", a.i32("y_row_stride"), a.dtype_param("Y_DT"), cpu::matmul(x, a.gather_int4("w_packed", "w_scale", 0, N, K)),
                 a.param("ACC") != 0);
}

// The rope of the launch's f32 arguments (rope.cuh's frequencies).
inline cpu::Rope rope_of(LaunchArgs& a, int64_t D) {
  std::vector<float> inv_freq(static_cast<size_t>(D / 2));
  const float factor = a.f32("yarn_factor");
  if (factor != 1.f) {  // the template's test for YaRN
    yarn::inv_freq_yarn(D, a.f32("theta"), factor, {a.f32("yarn_low"), a.f32("yarn_high")}, inv_freq.data());
  } else {
    yarn::inv_freq_plain(D, a.f32("theta"), inv_freq.data());
  }
  return cpu::Rope(std::move(inv_freq), a.f32("cos_sin_scale"));
}

inline void rope(LaunchArgs& a) {
  const int64_t D = a.param("ROPE_DIM"), H = a.param("HEADS"), n = a.i32("n_tokens");
  const cpu::Rope r = rope_of(a, D);
  const std::vector<int32_t> pos = a.gather_i32("positions", n);
  Matrix x = a.gather("x", Strided{n, D, a.i32("x_row_stride"), H, a.i32("x_head_stride")}, a.dtype_param("X_DT"));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < H; ++h) {
      if (a.param("INTERLEAVED")) r.apply_interleaved(x.row(t * H + h), pos[t]);
      else r.apply_rotate_half(x.row(t * H + h), pos[t]);
    }
  a.scatter("y", Strided{n, D, a.i32("y_row_stride"), H, a.i32("y_head_stride")}, a.dtype_param("Y_DT"), x);
}

// kv_append(cache, concat(rms_norm(latent), rope(key))) and the queries' rope (q_src -> q_dst),
// each value rounded once to its destination's dtype.
inline void mla_rope_append(LaunchArgs& a) {
  const int64_t C = a.param("C"), R = a.param("R"), H = a.param("HEADS"), n = a.i32("n_tokens"), slots = a.i32("max_slots");
  const DType src = a.dtype_param("X_DT");
  const bool il = a.param("INTERLEAVED") != 0;
  const cpu::Rope r = rope_of(a, R);
  const std::vector<int32_t> pos = a.gather_i32("positions", n);
  if (H > 0) {
    Matrix q = a.gather("q_src", Strided{n, R, a.i32("q_src_row_stride"), H, a.i32("q_src_head_stride")}, src);
    for (int64_t t = 0; t < n; ++t)
      for (int64_t h = 0; h < H; ++h) il ? r.apply_interleaved(q.row(t * H + h), pos[t]) : r.apply_rotate_half(q.row(t * H + h), pos[t]);
    a.scatter("q_dst", Strided{n, R, a.i32("q_dst_row_stride"), H, a.i32("q_dst_head_stride")}, a.dtype_param("Q_DT"), q);
  }
  const Matrix w = a.gather_rows("norm_weight", 1, C, C, DType::BF16);
  const Matrix latent = cpu::rms_norm(a.gather_rows("latent", n, C, a.i32("latent_stride"), src), w.data, a.f32("eps"));
  Matrix key = a.gather_rows("k_rope_src", n, R, a.i32("k_rope_stride"), src);
  for (int64_t t = 0; t < n; ++t) il ? r.apply_interleaved(key.row(t), pos[t]) : r.apply_rotate_half(key.row(t), pos[t]);
  const int32_t len = a.gather_i32("cache_len", 1)[0];
  const Matrix rows = cpu::kv_append(Matrix(0, C + R), {&latent, &key});
  for (int64_t t = 0; t < n; ++t) {
    Matrix row(1, C + R);
    std::copy_n(rows.row(t), C + R, row.row(0));
    if (len + t >= 0 && len + t < slots) a.scatter_rows("cache", C + R, a.dtype_param("KV_DT"), row, false, (len + t) * (C + R));
  }
}

// W_UK's product over HEADS heads (each W[b] read as [K, N]: matmul's W_LAYOUT 1), then the
// rope-append's work, as their two launches do (uk_rope_append.cuh).
inline void uk_rope_append(LaunchArgs& a) {
  const int64_t K = a.param("K"), N = a.param("N"), n = a.i32("n_tokens");
  for (int64_t b = 0; b < a.param("HEADS"); ++b) {
    const Matrix x = a.gather_rows("x", n, K, a.i32("x_row_stride"), a.dtype_param("X_DT"), b * a.i32("x_batch_stride"));
    const Matrix w = a.gather("w", Strided{N, K, 1, 1, 0, N, b * a.i32("w_batch_stride")}, DType::BF16);
    a.scatter_rows("y", a.i32("y_row_stride"), a.dtype_param("Y_DT"), cpu::matmul(x, w), false, b * a.i32("y_batch_stride"));
  }
  mla_rope_append(a);
}

// In place: step token t goes to cache row cache_len + t (none outside [0, max_slots)).
inline void kv_append(LaunchArgs& a) {
  const int64_t C = a.param("C"), R = a.param("R"), n = a.i32("n_tokens"), slots = a.i32("max_slots");
  const DType src = a.dtype_param("SRC_DT");
  const int32_t len = a.gather_i32("cache_len", 1)[0];
  const Matrix latent = a.gather_rows("latent_src", n, C, a.i32("latent_src_stride"), src);
  const Matrix rope = a.gather_rows("rope_src", n, R, a.i32("rope_src_stride"), src);
  const Matrix rows = cpu::kv_append(Matrix(0, C + R), {&latent, &rope});
  for (int64_t t = 0; t < n; ++t) {
    Matrix row(1, C + R);
    std::copy_n(rows.row(t), C + R, row.row(0));
    if (len + t >= 0 && len + t < slots) a.scatter_rows("cache", C + R, a.dtype_param("KV_DT"), row, false, (len + t) * (C + R));
  }
}

// In place: rows L + keep[i] -> L + i for i < n_keep, indices clamped as the template does.
inline void kv_compact(LaunchArgs& a) {
  const int64_t D = a.param("C") + a.param("R"), max_keep = a.i32("max_keep"), slots = a.i32("max_slots");
  const DType t = a.dtype_param("KV_DT");
  const int32_t len = a.gather_i32("cache_len", 1)[0];
  const int64_t n = std::clamp<int64_t>(a.gather_i32("n_keep", 1)[0], 0, max_keep);
  std::vector<int32_t> keep = a.gather_i32("keep", n);
  for (int32_t& k : keep) k = clamp_index(k, max_keep);
  Matrix step(max_keep, D);
  for (int64_t j = 0; j < max_keep; ++j) {
    const Matrix row = a.gather_rows("cache", 1, D, D, t, clamp_index(len + j, slots) * D);
    std::copy_n(row.row(0), D, step.row(j));
  }
  const Matrix kept = cpu::kv_compact(Matrix(0, D), step, keep);
  for (int64_t i = 0; i < n; ++i) {
    Matrix row(1, D);
    std::copy_n(kept.row(i), D, row.row(0));
    a.scatter_rows("cache", D, t, row, false, clamp_index(len + i, slots) * D);
  }
}

// Keys: the committed cache rows [0, cache_len), then the step's rows under the tree mask.
inline void mla_attention(LaunchArgs& a) {
  const int64_t H = a.param("HEADS"), C = a.param("C"), R = a.param("R"), n = a.i32("n_tokens");
  const int32_t past = a.gather_i32("cache_len", 1)[0];
  const Matrix ql = a.gather_rows("q_latent", n, H * C, a.i32("q_latent_row_stride"), a.dtype_param("Q_DT"));
  Matrix qr = a.gather("q_rope", Strided{n, R, a.i32("q_rope_row_stride"), H, a.i32("q_rope_head_stride")}, a.dtype_param("Q_DT"));
  qr.rows = n;  // [n*H, R] row-major is [n, H*R]
  qr.cols = H * R;
  const Matrix kv = a.gather_rows("kv_cache", past + n, C + R, C + R, a.dtype_param("KV_DT"));
  Matrix latent(kv.rows, C), k_rope(kv.rows, R);
  for (int64_t s = 0; s < kv.rows; ++s) {
    std::copy_n(kv.row(s), C, latent.row(s));
    std::copy_n(kv.row(s) + C, R, k_rope.row(s));
  }
  // The bucket's mask rows are mask_words wide; the op takes rows of mask_words(n).
  const int64_t words = a.i32("mask_words"), need = mask_words(n);
  const std::vector<uint32_t> bucket_mask = a.gather_u32("tree_mask", n * words);
  std::vector<uint32_t> mask(static_cast<size_t>(n * need));
  for (int64_t t = 0; t < n; ++t) std::copy_n(bucket_mask.begin() + t * words, need, mask.begin() + t * need);
  const Matrix o = cpu::mla_attention_absorbed(ql, qr, latent, k_rope, past, mask, cpu::MlaDims{H, C, 0, R, 0}, a.f32("softmax_scale"));
  a.scatter_rows("out", a.i32("out_row_stride"), a.dtype_param("O_DT"), o);
}

// The split pair (kernels_templates/mla_split.cuh). The partial's per-split state is the
// online softmax of the CPU op's scores restricted to the split's keys: m = their max, l = the
// sum of exp(score - m), acc = the exp(score - m)-weighted latent rows, in double; token t's
// candidate keys are [0, L + n_tokens) (the lowering always binds the tree mask step input),
// split i takes [i * per, min((i + 1) * per, n)), per = ceil(n / n_splits), the visibility is
// step_mask_allows' (the CPU op's); a split with no visible key has m = -inf, l = 0, acc = 0.
inline void mla_split_partial(LaunchArgs& a) {
  const int64_t H = a.param("HEADS"), C = a.param("C"), R = a.param("R"), n = a.i32("n_tokens"), splits = a.i32("n_splits");
  const int64_t past = std::max<int32_t>(a.gather_i32("cache_len", 1)[0], 0);
  const Matrix ql = a.gather_rows("q_latent", n, H * C, a.i32("q_latent_row_stride"), a.dtype_param("Q_DT"));
  const Matrix qr = a.gather("q_rope", Strided{n, R, a.i32("q_rope_row_stride"), H, a.i32("q_rope_head_stride")}, a.dtype_param("Q_DT"));
  const Matrix kv = a.gather_rows("kv_cache", past + n, C + R, C + R, a.dtype_param("KV_DT"));
  const int64_t words = a.i32("mask_words"), need = mask_words(n);
  const std::vector<uint32_t> bucket_mask = a.gather_u32("tree_mask", n * words);
  std::vector<uint32_t> mask(static_cast<size_t>(n * need));
  for (int64_t t = 0; t < n; ++t) std::copy_n(bucket_mask.begin() + t * words, need, mask.begin() + t * need);
  const float scale = a.f32("softmax_scale");
  Matrix ws(n * H * splits, C + 2);
  const int64_t keys = past + n, per = (keys + splits - 1) / splits;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t sp = 0; sp < splits; ++sp) {
        const int64_t b = std::min(sp * per, keys), e = std::min(b + per, keys);
        std::vector<double> score;
        std::vector<int64_t> key;
        for (int64_t s = b; s < e; ++s) {
          if (s >= past && !cpu::step_mask_allows(mask, n, t, s - past)) continue;
          double dot = 0.0;
          for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(ql.row(t)[h * C + c]) * kv.row(s)[c];
          for (int64_t r = 0; r < R; ++r) dot += static_cast<double>(qr.row(t * H + h)[r]) * kv.row(s)[C + r];
          score.push_back(dot * scale);
          key.push_back(s);
        }
        float* w = ws.row((t * H + h) * splits + sp);
        const double m = score.empty() ? -INFINITY : *std::max_element(score.begin(), score.end());
        double l = 0.0;
        std::vector<double> acc(static_cast<size_t>(C), 0.0);
        for (size_t k = 0; k < score.size(); ++k) {
          const double p = std::exp(score[k] - m);
          l += p;
          for (int64_t c = 0; c < C; ++c) acc[c] += p * kv.row(key[k])[c];
        }
        w[0] = static_cast<float>(m);
        w[1] = static_cast<float>(l);
        for (int64_t c = 0; c < C; ++c) w[2 + c] = static_cast<float>(acc[c]);
      }
  a.scatter_rows("workspace", C + 2, DType::F32, ws);
}

// out[t, h] = sum_s exp(m_s - M) acc_s / sum_s exp(m_s - M) l_s over the splits that saw a key
// (l_s > 0), M their max m; zeros where none did.
inline Matrix mla_split_merge(LaunchArgs& a) {
  const int64_t H = a.param("HEADS"), C = a.param("C"), n = a.i32("n_tokens"), splits = a.i32("n_splits");
  const Matrix ws = a.gather_rows("workspace", n * H * splits, C + 2, C + 2, DType::F32);
  Matrix o(n, H * C);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < H; ++h) {
      double M = -INFINITY, L = 0.0;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const float* w = ws.row((t * H + h) * splits + sp);
        if (w[1] > 0.f) M = std::max(M, static_cast<double>(w[0]));
      }
      std::vector<double> v(static_cast<size_t>(C), 0.0);
      for (int64_t sp = 0; sp < splits; ++sp) {
        const float* w = ws.row((t * H + h) * splits + sp);
        if (!(w[1] > 0.f)) continue;
        const double f = std::exp(w[0] - M);
        L += w[1] * f;
        for (int64_t c = 0; c < C; ++c) v[c] += w[2 + c] * f;
      }
      for (int64_t c = 0; c < C; ++c) o.row(t)[h * C + c] = L > 0 ? static_cast<float>(v[c] / L) : 0.f;
    }
  return o;
}

inline void mla_split_combine(LaunchArgs& a) { a.scatter_rows("out", a.i32("out_row_stride"), a.dtype_param("O_DT"), mla_split_merge(a)); }

// The merge rounded to L_DT (as the combine would store it), then each head's W_UV product:
// y[t, h, :] = lat[t, h, :] W[h]^T, W[h] bf16 [N, C] at h * w_head_stride.
inline void mla_split_combine_uv(LaunchArgs& a) {
  const int64_t H = a.param("HEADS"), C = a.param("C"), N = a.param("N"), n = a.i32("n_tokens");
  Matrix lat = mla_split_merge(a);
  if (a.dtype_param("L_DT") == DType::BF16)
    for (float& v : lat.data) v = bf16_to_float(float_to_bf16(v));
  Matrix y(n, H * N);
  for (int64_t h = 0; h < H; ++h) {
    const Matrix w = a.gather_rows("w", N, C, C, DType::BF16, h * a.i32("w_head_stride"));
    Matrix x(n, C);
    for (int64_t t = 0; t < n; ++t) std::copy_n(lat.row(t) + h * C, C, x.row(t));
    const Matrix yh = cpu::matmul(x, w);
    for (int64_t t = 0; t < n; ++t) std::copy_n(yh.row(t), N, y.row(t) + h * N);
  }
  a.scatter_rows("y", a.i32("y_row_stride"), a.dtype_param("O_DT"), y);
}

inline void gqa_attention(LaunchArgs& a) {
  const int64_t H = a.param("HEADS"), G = a.param("KV_HEADS"), D = a.param("D"), n = a.i32("n_queries");
  const int64_t keys = a.gather_i32("n_keys_base", 1)[0] + a.i32("n_keys_extra");
  const DType kv = a.dtype_param("KV_DT");
  const Matrix q = a.gather_rows("q", n, H * D, a.i32("q_row_stride"), a.dtype_param("Q_DT"));
  const Matrix k = a.gather_rows("k", keys, G * D, a.i32("k_row_stride"), kv);
  const Matrix v = a.gather_rows("v", keys, G * D, a.i32("v_row_stride"), kv);
  a.scatter_rows("out", a.i32("out_row_stride"), a.dtype_param("O_DT"),
                 cpu::gqa_attention_full(q, k, v, H, G, D, a.f32("scale"), a.i32("context_window")));
}

inline void add(LaunchArgs& a) {
  const int64_t D = a.param("D"), n = a.i32("n_tokens");
  const Matrix x = a.gather_rows("a", n, D, D, a.dtype_param("A_DT")), y = a.gather_rows("b", n, D, D, a.dtype_param("B_DT"));
  a.scatter_rows("out", D, a.dtype_param("O_DT"), cpu::add(x, y));
}

// The add and the norm of its sum in one launch (add_norm.cuh): out = a + b, y = rms_norm of the
// sum as out stores it (rounded first where out is bf16).
inline void add_norm(LaunchArgs& a) {
  const int64_t H = a.param("H"), n = a.i32("n_tokens");
  const Matrix x = a.gather_rows("a", n, H, H, a.dtype_param("A_DT")), y = a.gather_rows("b", n, H, H, a.dtype_param("B_DT"));
  Matrix sum = cpu::add(x, y);
  if (a.dtype_param("O_DT") == DType::BF16)
    for (float& v : sum.data) v = bf16_to_float(float_to_bf16(v));
  const Matrix w = a.gather_rows("weight", 1, H, H, DType::BF16);
  a.scatter_rows("out", H, a.dtype_param("O_DT"), sum);
  a.scatter_rows("y", H, a.dtype_param("Y_DT"), cpu::rms_norm(sum, w.data, a.f32("eps")));
}

inline void swiglu(LaunchArgs& a) {
  const int64_t I = a.param("I"), n = a.i32("n_tokens");
  const Matrix g = a.gather_rows("gate", n, I, a.i32("gate_row_stride"), a.dtype_param("G_DT"));
  const Matrix u = a.gather_rows("up", n, I, a.i32("up_row_stride"), a.dtype_param("U_DT"));
  a.scatter_rows("out", a.i32("out_row_stride"), a.dtype_param("O_DT"), cpu::swiglu(g, u));
}

inline void copy_rows(LaunchArgs& a) {
  const Matrix x = a.gather_rows("x", a.i32("n_rows"), a.param("COLS"), a.i32("x_stride"), a.dtype_param("X_DT"));
  a.scatter_rows("y", a.i32("y_stride"), a.dtype_param("Y_DT"), x);
}

// The router's ids and weights from its logits and bias arguments (the router kernel's, or a
// gate/up launch's that routes its step: ROUTE > 0, ungrouped).
inline void route(LaunchArgs& a, int64_t n_group, int64_t topk_group, bool norm) {
  const int64_t E = a.param("E"), n = a.i32("n_tokens");
  write_routing(a, a.gather_rows("logits", n, E, E, DType::F32), a.param("TOPK"), n_group, topk_group, norm);
}

inline void moe_router(LaunchArgs& a) { route(a, a.param("N_GROUP"), a.param("TOPK_GROUP"), a.param("NORM") != 0); }

// Every expert's matrix [E * rows, cols] (bf16, or INT4 with its scales: W_FMT 1).
inline Matrix expert_stack(LaunchArgs& a, const char* w, const char* scale, int64_t E, int64_t rows, int64_t cols) {
  if (a.param("W_FMT") == 0) return a.gather_rows(w, E * rows, cols, cols, DType::BF16);
  return a.gather_int4(w, scale, 0, E * rows, cols);
}

inline cpu::Routing clamped_routing(LaunchArgs& a, int64_t n, int64_t K, int64_t E) {
  cpu::Routing r;
  r.top_k = K;
  r.experts = a.gather_i32("topk_ids", n * K);
  for (int32_t& e : r.experts) e = clamp_index(e, E);  // the kernels clamp expert ids
  return r;
}

// The grouped kernels compute per (token, k) pair what the per-token halves of the CPU op do;
// which block streams which expert is invisible here (each pair's rows are written once).
inline void moe_grouped_gate_up(LaunchArgs& a) {
  const int64_t H = a.param("H"), I = a.param("I"), K = a.param("TOPK"), E = a.param("E"), n = a.i32("n_tokens");
  const Matrix x = a.gather_rows("x", n, H, a.i32("x_row_stride"), a.dtype_param("X_DT"));
  // The router folded in writes the ids first (unless its logits' launch routed the step: the
  // logits argument is the ids).
  if (a.param("ROUTE") > 0 && !a.same_pointer("logits", "topk_ids")) route(a, 1, 1, a.param("RNORM") != 0);
  const cpu::Routing r = clamped_routing(a, n, K, E);
  const Matrix gate = expert_stack(a, "w_gate", "w_gate_scale", E, I, H), up = expert_stack(a, "w_up", "w_up_scale", E, I, H);
  std::vector<cpu::ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e) experts.push_back({gate.row(e * I), up.row(e * I), nullptr, I});
  a.scatter_rows("h", I, DType::F32, cpu::moe_expert_hidden(x, r, experts));
}

// partial[p] = topk_weights[p] * down_e h[p]: the CPU combine with each pair as its own token.
inline void moe_grouped_down(LaunchArgs& a) {
  const int64_t H = a.param("H"), I = a.param("I"), K = a.param("TOPK"), E = a.param("E"), n = a.i32("n_tokens");
  const Matrix h = a.gather_rows("h", n * K, I, I, DType::F32);
  cpu::Routing r = clamped_routing(a, n, K, E);
  r.top_k = 1;
  r.weights = a.gather_rows("topk_weights", 1, n * K, n * K, DType::F32).data;
  const Matrix down = expert_stack(a, "w_down", "w_down_scale", E, H, I);
  std::vector<cpu::ExpertWeights> experts;
  for (int64_t e = 0; e < E; ++e) experts.push_back({nullptr, nullptr, down.row(e * H), I});
  a.scatter_rows("partial", H, DType::F32, cpu::moe_expert_combine(h, r, experts, H));
}

// out[t] = (ACC: residual[t] +) the sum of its TOPK partial rows, k in order.
inline void moe_combine(LaunchArgs& a) {
  const int64_t H = a.param("H"), K = a.param("TOPK"), n = a.i32("n_tokens");
  const Matrix partial = a.gather_rows("partial", n * K, H, H, DType::F32);
  Matrix total(n, H);
  for (int64_t k = 0; k < K; ++k) {
    Matrix part(n, H);
    for (int64_t t = 0; t < n; ++t) std::copy_n(partial.row(t * K + k), H, part.row(t));
    total = cpu::add(total, part);
  }
  if (a.param("ACC") != 0)  // the fused residual add: residual (may be out itself) + the routed sum
    total = cpu::add(a.gather_rows("residual", n, H, a.i32("out_row_stride"), a.dtype_param("Y_DT")), total);
  a.scatter_rows("out", a.i32("out_row_stride"), a.dtype_param("Y_DT"), total);
}

inline void argmax(LaunchArgs& a) {
  const int64_t V = a.param("V"), n = a.i32("n_rows");
  const Matrix x = a.gather_rows("logits", n, V, a.i32("row_stride"), a.dtype_param("X_DT"));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {  // -1 marks a row that is not all finite, as the kernel does
    const bool finite = std::all_of(x.row(r), x.row(r) + V, [](float v) { return std::isfinite(v); });
    ids[r] = finite ? static_cast<int32_t>(cpu::argmax(x.row(r), V)) : -1;
  }
  a.scatter_i32("out_ids", ids);
}

// Values as log-probabilities when LOGPROB, else the raw logits.
inline void topk(LaunchArgs& a) {
  const int64_t V = a.param("V"), K = a.param("K"), n = a.i32("n_rows");
  const Matrix x = a.gather_rows("logits", n, V, a.i32("row_stride"), a.dtype_param("X_DT"));
  const Matrix lp = a.param("LOGPROB") ? cpu::log_softmax(x) : x;
  std::vector<int32_t> ids;
  Matrix vals(n, K);
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<int64_t> best = cpu::top_k(x.row(r), V, K);
    for (int64_t j = 0; j < K; ++j) {
      ids.push_back(static_cast<int32_t>(best[j]));
      vals.row(r)[j] = lp.row(r)[best[j]];
    }
  }
  a.scatter_i32("out_ids", ids);
  a.scatter_rows("out_vals", K, DType::F32, vals);
}

// Family name -> its emulation. A new family adds its line here.
inline const std::map<std::string, void (*)(LaunchArgs&)>& table() {
  static const std::map<std::string, void (*)(LaunchArgs&)> t = {
      {"embedding", embedding},     {"embedding_norm", embedding_norm}, {"rms_norm", rms_norm},       {"matmul", matmul},       {"matmul_int4", matmul_int4}, {"matmul_siblings", matmul_siblings},
      {"rope", rope},               {"kv_append", kv_append},     {"mla_rope_append", mla_rope_append}, {"uk_rope_append", uk_rope_append}, {"kv_compact", kv_compact}, {"mla_attention", mla_attention},
      {"mla_split_partial", mla_split_partial}, {"mla_split_combine", mla_split_combine},
      {"mla_split_combine_uv", mla_split_combine_uv},
      {"gqa_attention", gqa_attention}, {"add", add}, {"add_norm", add_norm},             {"swiglu", swiglu},       {"copy_rows", copy_rows},
      {"moe_router", moe_router},   {"moe_grouped_gate_up", moe_grouped_gate_up},
      {"moe_grouped_down", moe_grouped_down}, {"moe_combine", moe_combine}, {"argmax", argmax}, {"topk", topk},
      {"cublaslt_matmul", cublaslt_matmul}};
  return t;
}

}  // namespace kplan::codegen::testing_util::families
