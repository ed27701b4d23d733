#include "runtime/cpu/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "ir/support/int4.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/cpu/dflash_attention.h"
#include "runtime/cpu/mla_attention.h"
#include "runtime/cpu/moe.h"
#include "runtime/cpu/rope.h"
#include "runtime/cpu/step_mask.h"

namespace kplan::cpu {

using ir::OpKind;

const ir::Function& function_named(const ir::Module& m, const char* name) {
  const ir::Function* fn = m.function(name);
  if (!fn) throw Error(std::string("cpu backend: the compiled module has no @") + name);
  return *fn;
}

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

[[noreturn]] void fail(const ir::Op& op, const std::string& what) {
  throw Error("cpu interpreter: " + std::string(op.name()) + ": " + what);
}

int64_t eval_dim(const ir::Dim& d, const std::map<std::string, int64_t>& symbols) {
  int64_t v = d.constant;
  for (const auto& s : d.symbols) {
    auto it = symbols.find(s);
    if (it == symbols.end()) throw Error("cpu interpreter: symbol " + s + " is not bound by the arguments");
    v += it->second;
  }
  return v;
}

std::vector<int64_t> eval_shape(const ir::Type& t, const std::map<std::string, int64_t>& symbols) {
  std::vector<int64_t> s;
  for (const auto& d : t.shape) s.push_back(eval_dim(d, symbols));
  return s;
}

// Product of dims [from, to).
int64_t span_size(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

// A Matrix copy of a 2-D float tensor (or of rows x cols elements of any tensor).
Matrix as_matrix(const Tensor& t, int64_t rows, int64_t cols) {
  Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data.assign(t.f.begin(), t.f.begin() + rows * cols);
  return m;
}

TensorPtr from_matrix(Matrix m, std::vector<int64_t> shape) {
  auto t = std::make_shared<Tensor>();
  t->shape = std::move(shape);
  t->f = std::move(m.data);
  return t;
}

// compressed-tensors pack-quantized INT4 (ir/OPS.md matmul_int4, ir/support/int4.h): packed
// [N, K/8], scale [N, K/G] -> w [N, K] = q * scale.
std::vector<float> dequantize_int4(const int32_t* packed, const float* scale, int64_t n, int64_t k,
                                   int64_t group) {
  std::vector<float> w(static_cast<size_t>(n * k));
  const int64_t words = k / int4::kValuesPerWord, groups = k / group;
  for (int64_t r = 0; r < n; ++r) {
    const auto* row = reinterpret_cast<const uint32_t*>(packed + r * words);
    for (int64_t c = 0; c < k; ++c)
      w[r * k + c] = static_cast<float>(int4::value(row, c)) * scale[r * groups + c / group];
  }
  return w;
}

}  // namespace

struct Interpreter::OpCache {
  std::vector<float> dequantized;                 // matmul_int4: [N, K]
  std::vector<std::vector<float>> expert_weights; // moe_experts_int4: gate, up, down stacks
  std::unique_ptr<Rope> rope;
};

Interpreter::Interpreter(const ir::Function& fn, const WeightTable& weights) : fn_(fn) {
  for (const ir::Op* op : fn.ops())
    if (op->kind() == OpKind::Weight || op->kind() == OpKind::WeightStack) weights_[op->result()] = weights.load(*op);
}

Interpreter::~Interpreter() = default;

Interpreter::OpCache& Interpreter::cache(const ir::Op* op) {
  auto& c = caches_[op];
  if (!c) c = std::make_unique<OpCache>();
  return *c;
}

std::map<std::string, TensorPtr> Interpreter::run(const std::map<std::string, TensorPtr>& args) {
  std::unordered_map<const ir::Value*, TensorPtr> values = weights_;
  std::map<std::string, int64_t> symbols;
  router_margins_.clear();
  // Bind symbols from dims that are one symbol alone, then check every argument's shape.
  for (const ir::Value* a : fn_.args()) {
    auto it = args.find(a->name());
    if (it == args.end() || !it->second)
      throw Error("cpu interpreter: @" + fn_.name() + " needs argument %" + a->name());
    const Tensor& t = *it->second;
    if (t.shape.size() != a->type().rank())
      throw Error("cpu interpreter: argument %" + a->name() + " has shape " + shape_str(t.shape) +
                  ", expected " + a->type().str());
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const ir::Dim& dim = a->type().shape[d];
      if (dim.symbols.size() == 1 && dim.constant == 0) symbols.emplace(dim.symbols[0], t.shape[d]);
    }
    values[a] = it->second;
  }
  for (const ir::Value* a : fn_.args())
    if (eval_shape(a->type(), symbols) != values[a]->shape)
      throw Error("cpu interpreter: argument %" + a->name() + " has shape " +
                  shape_str(values[a]->shape) + ", expected " + a->type().str());

  std::map<std::string, TensorPtr> outputs;
  for (const ir::Op* op : fn_.ops()) {
    if (op->kind() == OpKind::Weight || op->kind() == OpKind::WeightStack) continue;
    std::vector<const Tensor*> in;
    for (const ir::Value* v : op->operands()) in.push_back(values.at(v).get());
    if (op->kind() == OpKind::Output) {
      outputs[op->attrs().get_string("name")] = values.at(op->operand(0));
      continue;
    }
    std::vector<TensorPtr> results = execute(*op, in, symbols);
    for (size_t r = 0; r < op->num_results(); ++r) {
      const auto want = eval_shape(op->result(r)->type(), symbols);
      if (results[r]->shape != want)
        fail(*op, "result " + std::to_string(r) + " has shape " + shape_str(results[r]->shape) +
                      ", its IR type says " + op->result(r)->type().str());
      values[op->result(r)] = results[r];
    }
  }
  return outputs;
}

std::vector<TensorPtr> Interpreter::execute(const ir::Op& op, const std::vector<const Tensor*>& in,
                                            const std::map<std::string, int64_t>& symbols) {
  const ir::Attrs& at = op.attrs();
  auto one = [](Tensor t) { return std::vector<TensorPtr>{std::make_shared<Tensor>(std::move(t))}; };
  switch (op.kind()) {
    case OpKind::Slice: {
      const Tensor& x = *in[0];
      const size_t axis = static_cast<size_t>(at.get_int("axis"));
      const int64_t start = at.get_int("start"), size = at.get_int("size");
      if (start < 0 || start + size > x.shape[axis]) fail(op, "slice out of range");
      auto shape = x.shape;
      shape[axis] = size;
      Tensor y = x.is_int ? Tensor::ints(shape) : Tensor::floats(shape);
      const int64_t outer = span_size(x.shape, 0, axis), inner = span_size(x.shape, axis + 1, x.shape.size());
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t s = 0; s < size; ++s) {
          const int64_t src = (o * x.shape[axis] + start + s) * inner, dst = (o * size + s) * inner;
          if (x.is_int) std::copy_n(x.i.begin() + src, inner, y.i.begin() + dst);
          else std::copy_n(x.f.begin() + src, inner, y.f.begin() + dst);
        }
      return one(std::move(y));
    }
    case OpKind::Reshape: {
      Tensor y = *in[0];
      y.shape = eval_shape(op.result()->type(), symbols);
      if (y.numel() != in[0]->numel()) fail(op, "element counts differ");
      return one(std::move(y));
    }
    case OpKind::Transpose: {
      const Tensor& x = *in[0];
      const auto& perm = at.get_ints("perm");
      const size_t rank = x.shape.size();
      std::vector<int64_t> shape(rank);
      for (size_t i = 0; i < rank; ++i) shape[i] = x.shape[perm[i]];
      Tensor y = x.is_int ? Tensor::ints(shape) : Tensor::floats(shape);
      std::vector<int64_t> x_stride(rank, 1);
      for (size_t i = rank; i-- > 1;) x_stride[i - 1] = x_stride[i] * x.shape[i];
      std::vector<int64_t> idx(rank, 0);
      for (int64_t n = 0; n < y.numel(); ++n) {
        int64_t src = 0;
        for (size_t i = 0; i < rank; ++i) src += idx[i] * x_stride[perm[i]];
        if (x.is_int) y.i[n] = x.i[src];
        else y.f[n] = x.f[src];
        for (size_t i = rank; i-- > 0;) {
          if (++idx[i] < shape[i]) break;
          idx[i] = 0;
        }
      }
      return one(std::move(y));
    }
    case OpKind::Concat: {
      const size_t axis = static_cast<size_t>(at.get_int("axis"));
      auto shape = in[0]->shape;
      shape[axis] = 0;
      for (const Tensor* t : in) shape[axis] += t->shape[axis];
      Tensor y = in[0]->is_int ? Tensor::ints(shape) : Tensor::floats(shape);
      const int64_t outer = span_size(shape, 0, axis), inner = span_size(shape, axis + 1, shape.size());
      int64_t offset = 0;
      for (const Tensor* t : in) {
        const int64_t n = t->shape[axis] * inner;
        for (int64_t o = 0; o < outer; ++o) {
          const int64_t dst = o * shape[axis] * inner + offset;
          if (t->is_int) std::copy_n(t->i.begin() + o * n, n, y.i.begin() + dst);
          else std::copy_n(t->f.begin() + o * n, n, y.f.begin() + dst);
        }
        offset += n;
      }
      return one(std::move(y));
    }
    case OpKind::Add: {
      if (in[0]->shape != in[1]->shape) fail(op, "shapes differ");
      Tensor y = *in[0];
      for (size_t i = 0; i < y.f.size(); ++i) y.f[i] += in[1]->f[i];
      return one(std::move(y));
    }
    case OpKind::Swiglu: {
      if (in[0]->shape != in[1]->shape) fail(op, "shapes differ");
      Tensor y = Tensor::floats(in[0]->shape);
      for (size_t i = 0; i < y.f.size(); ++i) y.f[i] = silu(in[0]->f[i]) * in[1]->f[i];
      return one(std::move(y));
    }
    case OpKind::RmsNorm: {
      const Tensor& x = *in[0];
      const int64_t d = x.shape.back();
      if (in[1]->numel() != d) fail(op, "weight does not match the last dim");
      Tensor y = Tensor::floats(x.shape);
      const float eps = static_cast<float>(at.get_float("eps"));
      for (int64_t r = 0; r < x.numel() / d; ++r)
        rms_norm_row(x.f.data() + r * d, d, in[1]->f.data(), eps, y.f.data() + r * d);
      return one(std::move(y));
    }
    case OpKind::Matmul:
    case OpKind::LmHead:
    case OpKind::MatmulInt4: {
      const Tensor& x = *in[0];
      const int64_t k = x.shape.back();
      const float* w;
      int64_t n;
      if (op.kind() == OpKind::MatmulInt4) {
        n = in[1]->shape[0];
        OpCache& c = cache(&op);
        if (c.dequantized.empty())
          c.dequantized = dequantize_int4(in[1]->i.data(), in[2]->f.data(), n, k, at.get_int("group_size"));
        w = c.dequantized.data();
      } else {
        if (in[1]->shape.size() != 2 || in[1]->shape[1] != k) fail(op, "weight does not match the input");
        n = in[1]->shape[0];
        w = in[1]->f.data();
      }
      auto shape = x.shape;
      shape.back() = n;
      Tensor y = Tensor::floats(shape);
      matmul_rows(x.f.data(), x.numel() / k, w, n, k, y.f.data());
      return one(std::move(y));
    }
    case OpKind::HeadMatmul: {
      const Tensor &x = *in[0], &w = *in[1];  // x [T, H, K], w [H, N, K]
      const int64_t T = x.shape[0], H = x.shape[1], K = x.shape[2], N = w.shape[1];
      if (w.shape[0] != H || w.shape[2] != K) fail(op, "weight does not match the heads");
      Tensor y = Tensor::floats({T, H, N});
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
          matvec(x.f.data() + (t * H + h) * K, w.f.data() + h * N * K, N, K, y.f.data() + (t * H + h) * N);
      return one(std::move(y));
    }
    case OpKind::Embedding: {
      const Tensor &ids = *in[0], &table = *in[1];
      const int64_t V = table.shape[0], D = table.shape[1];
      Tensor y = Tensor::floats({ids.numel(), D});
      for (int64_t r = 0; r < ids.numel(); ++r) {
        if (ids.i[r] < 0 || ids.i[r] >= V)
          throw Error("token id " + std::to_string(ids.i[r]) + " is outside the vocabulary [0, " +
                      std::to_string(V) + ")");
        std::copy_n(table.f.begin() + ids.i[r] * D, D, y.f.begin() + r * D);
      }
      return one(std::move(y));
    }
    case OpKind::Rope: {
      const Tensor &x = *in[0], &pos = *in[1];
      const int64_t D = x.shape.back(), R = x.shape[0];
      OpCache& c = cache(&op);
      if (!c.rope) {
        RopeScaling s;
        s.type = at.get_string("scaling");
        if (s.type == "yarn") {
          s.factor = at.get_float("factor");
          s.original_max_position_embeddings = at.get_int("original_max_position_embeddings");
          s.beta_fast = at.get_float("beta_fast");
          s.beta_slow = at.get_float("beta_slow");
        }
        c.rope = std::make_unique<Rope>(D, at.get_float("theta"), s, 0, at.get_float("attention_factor"));
      }
      const bool interleaved = at.get_bool("interleaved");
      Tensor y = x;
      const int64_t per_row = x.numel() / R;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < per_row; j += D) {
          float* v = y.f.data() + r * per_row + j;
          if (interleaved) c.rope->apply_interleaved(v, pos.i[r]);
          else c.rope->apply_rotate_half(v, pos.i[r]);
        }
      return one(std::move(y));
    }
    case OpKind::MlaAttentionExpanded: {
      const Tensor &qn = *in[0], &qr = *in[1], &kn = *in[2], &kr = *in[3], &v = *in[4];
      const Tensor* mask = in.size() > 5 ? in[5] : nullptr;
      const int64_t T = qn.shape[0], H = qn.shape[1], Dn = qn.shape[2], Dr = qr.shape[2];
      const int64_t N = kn.shape[0], Dv = v.shape[2], S = N - T;
      const float scale = static_cast<float>(at.get_float("scale"));
      std::span<const uint32_t> bits;
      if (mask) bits = {reinterpret_cast<const uint32_t*>(mask->i.data()), mask->i.size()};
      Tensor y = Tensor::floats({T, H, Dv});
      std::vector<double> p(static_cast<size_t>(N));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t j = 0; j < N; ++j) {
            if (j >= S && !step_mask_allows(bits, T, t, j - S)) {
              p[j] = -std::numeric_limits<double>::infinity();
              continue;
            }
            double dot = 0.0;
            for (int64_t d = 0; d < Dn; ++d)
              dot += static_cast<double>(qn.f[(t * H + h) * Dn + d]) * kn.f[(j * H + h) * Dn + d];
            for (int64_t d = 0; d < Dr; ++d)
              dot += static_cast<double>(qr.f[(t * H + h) * Dr + d]) * kr.f[j * Dr + d];
            p[j] = dot * scale;
            m = std::max(m, p[j]);
          }
          double z = 0.0;
          for (int64_t j = 0; j < N; ++j) z += (p[j] = std::isinf(p[j]) ? 0.0 : std::exp(p[j] - m));
          for (int64_t d = 0; d < Dv; ++d) {
            double acc = 0.0;
            for (int64_t j = 0; j < N; ++j)
              if (p[j] != 0.0) acc += p[j] / z * v.f[(j * H + h) * Dv + d];
            y.f[(t * H + h) * Dv + d] = static_cast<float>(acc);
          }
        }
      return one(std::move(y));
    }
    case OpKind::MlaAttention: {
      const Tensor &ql = *in[0], &qr = *in[1], &kv = *in[2];
      const Tensor* mask = in.size() > 3 ? in[3] : nullptr;
      const int64_t T = ql.shape[0], H = ql.shape[1], L = at.get_int("kv_lora_rank");
      const int64_t Dr = qr.shape[2], N = kv.shape[0];
      if (kv.shape[1] != L + Dr) fail(op, "cache rows are not [latent | rope key]");
      Matrix latent(N, L), k_rope(N, Dr);
      for (int64_t j = 0; j < N; ++j) {
        std::copy_n(kv.f.begin() + j * (L + Dr), L, latent.row(j));
        std::copy_n(kv.f.begin() + j * (L + Dr) + L, Dr, k_rope.row(j));
      }
      std::span<const uint32_t> bits;
      if (mask) bits = {reinterpret_cast<const uint32_t*>(mask->i.data()), mask->i.size()};
      MlaDims d{H, L, 0, Dr, 0};
      Matrix o = mla_attention_absorbed(as_matrix(ql, T, H * L), as_matrix(qr, T, H * Dr), latent,
                                        k_rope, N - T, bits, d, static_cast<float>(at.get_float("scale")));
      return {from_matrix(std::move(o), {T, H, L})};
    }
    case OpKind::KvAppend: {
      const Tensor& cache_in = *in[0];
      const int64_t S = cache_in.shape[0], D = cache_in.shape[1], T = in[1]->shape[0];
      Tensor y = Tensor::floats({S + T, D});
      std::copy(cache_in.f.begin(), cache_in.f.end(), y.f.begin());
      int64_t col = 0;
      for (size_t p = 1; p < in.size(); ++p) {
        const int64_t w = in[p]->shape[1];
        for (int64_t t = 0; t < T; ++t) std::copy_n(in[p]->f.begin() + t * w, w, y.f.begin() + (S + t) * D + col);
        col += w;
      }
      if (col != D) fail(op, "parts do not fill a cache row");
      return one(std::move(y));
    }
    case OpKind::KvCompact: {
      const Tensor &cache_in = *in[0], &step = *in[1], &keep = *in[2];
      const int64_t S = cache_in.shape[0], D = cache_in.shape[1], T = step.shape[0], A = keep.numel();
      Tensor y = Tensor::floats({S + A, D});
      std::copy(cache_in.f.begin(), cache_in.f.end(), y.f.begin());
      for (int64_t a = 0; a < A; ++a) {
        if (keep.i[a] < 0 || keep.i[a] >= T) fail(op, "keep index " + std::to_string(keep.i[a]) + " outside the step");
        std::copy_n(step.f.begin() + keep.i[a] * D, D, y.f.begin() + (S + a) * D);
      }
      return one(std::move(y));
    }
    case OpKind::GqaAttention: {
      const Tensor &q = *in[0], &k = *in[1], &v = *in[2];
      const int64_t Tq = q.shape[0], Hq = q.shape[1], D = q.shape[2], Tk = k.shape[0], Hkv = k.shape[1];
      Matrix o = gqa_attention_full(as_matrix(q, Tq, Hq * D), as_matrix(k, Tk, Hkv * D),
                                    as_matrix(v, Tk, Hkv * D), Hq, Hkv, D,
                                    static_cast<float>(at.get_float("scale")),
                                    at.has("context_window") ? at.get_int("context_window") : 0);
      return {from_matrix(std::move(o), {Tq, Hq, D})};
    }
    case OpKind::MoeRouter: {
      const Tensor &logits = *in[0], &bias = *in[1];
      const int64_t T = logits.shape[0], E = logits.shape[1];
      RouterParams p{E, at.get_int("top_k"), at.get_int("n_group"), at.get_int("topk_group"),
                     at.get_bool("norm_topk_prob"), static_cast<float>(at.get_float("routed_scaling_factor"))};
      Routing r = moe_route_logits(as_matrix(logits, T, E), bias.f, p);
      if (router_margins_.empty()) router_margins_.assign(r.margins.size(), std::numeric_limits<float>::infinity());
      for (size_t t = 0; t < r.margins.size() && t < router_margins_.size(); ++t)
        router_margins_[t] = std::min(router_margins_[t], r.margins[t]);
      Tensor w = Tensor::floats({T, p.top_k}), ids = Tensor::ints({T, p.top_k});
      w.f = r.weights;
      ids.i = r.experts;
      return {std::make_shared<Tensor>(std::move(w)), std::make_shared<Tensor>(std::move(ids))};
    }
    case OpKind::MoeExperts:
    case OpKind::MoeExpertsInt4: {
      const Tensor &x = *in[0], &w = *in[1], &ids = *in[2];
      const int64_t T = x.shape[0], H = x.shape[1], k = w.shape[1];
      const float *gate, *up, *down;
      int64_t E, I;
      if (op.kind() == OpKind::MoeExperts) {
        E = in[3]->shape[0];
        I = in[3]->shape[1];
        gate = in[3]->f.data();
        up = in[4]->f.data();
        down = in[5]->f.data();
      } else {
        E = in[3]->shape[0];
        I = in[3]->shape[1];
        OpCache& c = cache(&op);
        if (c.expert_weights.empty()) {
          const int64_t G = at.get_int("group_size");
          // gate/up [E, I, H], down [E, H, I], each expert dequantised on its own.
          for (int part = 0; part < 3; ++part) {
            const Tensor &packed = *in[3 + 2 * part], &scale = *in[4 + 2 * part];
            const int64_t n = packed.shape[1], kk = part < 2 ? H : I;
            std::vector<float> all;
            for (int64_t e = 0; e < E; ++e) {
              auto one_expert = dequantize_int4(packed.i.data() + e * n * (kk / 8),
                                                scale.f.data() + e * n * (kk / G), n, kk, G);
              all.insert(all.end(), one_expert.begin(), one_expert.end());
            }
            c.expert_weights.push_back(std::move(all));
          }
        }
        gate = c.expert_weights[0].data();
        up = c.expert_weights[1].data();
        down = c.expert_weights[2].data();
      }
      Routing r;
      r.top_k = k;
      r.weights = w.f;
      r.experts = ids.i;
      std::vector<ExpertWeights> experts;
      for (int64_t e = 0; e < E; ++e)
        experts.push_back({gate + e * I * H, up + e * I * H, down + e * H * I, I});
      return {from_matrix(moe_experts(as_matrix(x, T, H), r, experts), {T, H})};
    }
    case OpKind::Argmax: {
      const Tensor& x = *in[0];
      const int64_t R = x.shape[0], V = x.shape[1];
      Tensor y = Tensor::ints({R});
      for (int64_t r = 0; r < R; ++r) {
        const float* row = x.f.data() + r * V;
        // argmax over a NaN row picks id 0 and decodes junk with exit 0: refuse it instead.
        if (const int64_t v = first_non_finite(reinterpret_cast<const uint8_t*>(row), DType::F32, V); v >= 0)
          fail(op, "the logits of row " + std::to_string(r) + " are not finite (" + std::to_string(row[v]) +
                       " at id " + std::to_string(v) + "): the activations overflowed or a weight is damaged");
        y.i[r] = static_cast<int32_t>(argmax(row, V));
      }
      return one(std::move(y));
    }
    case OpKind::TopK: {
      const Tensor& x = *in[0];
      const int64_t R = x.shape[0], V = x.shape[1], k = at.get_int("k");
      Tensor values = Tensor::floats({R, k}), ids = Tensor::ints({R, k});
      for (int64_t r = 0; r < R; ++r) {
        auto best = top_k(x.f.data() + r * V, V, k);
        for (int64_t j = 0; j < k; ++j) {
          values.f[r * k + j] = x.f[r * V + best[j]];
          ids.i[r * k + j] = static_cast<int32_t>(best[j]);
        }
      }
      return {std::make_shared<Tensor>(std::move(values)), std::make_shared<Tensor>(std::move(ids))};
    }
    case OpKind::LogSoftmax: {
      Tensor y = *in[0];
      const int64_t V = y.shape.back();
      for (int64_t r = 0; r < y.numel() / V; ++r) log_softmax_inplace(y.f.data() + r * V, V);
      return one(std::move(y));
    }
    case OpKind::Weight:
    case OpKind::WeightStack:
    case OpKind::Output:
      break;
  }
  fail(op, "not executable here");
}

}  // namespace kplan::cpu
