// The backend-ops table: every IR op (ir/op_kind.h) at a few shapes, dtypes and masks. A new op,
// or a new lowering of one, arrives with its row here. Rows the GPU cannot run yet
// (lowered = false) return an expectation written from ir/OPS.md by hand, so the CPU op is still
// checked against something other than itself.
#include <cmath>
#include <limits>

#include "compiler/driver/build_ir.h"
#include "ir/support/tree_mask.h"
#include "tests/unit/ops/op_case.h"

namespace kplan::ops_test {
namespace {

using ir::Dim;
using ir::OpKind;
using ir::Value;
using Expect = std::optional<std::vector<float>>;

const Dim T = Dim::sym("T");

Value* heads(CaseBuilder& c, Value* x, int64_t h, int64_t d) { return c.b().reshape(x, {T, h, d}); }

ir::Attrs router_attrs(int64_t k, int64_t groups, int64_t topk_group, bool norm, double scaling) {
  ir::Attrs a;
  a.set("top_k", k);
  a.set("n_group", groups);
  a.set("topk_group", topk_group);
  a.set("norm_topk_prob", norm);
  a.set("routed_scaling_factor", scaling);
  return a;
}

RopeScaling yarn_scaling() {
  RopeScaling s;
  s.type = "yarn";
  s.factor = 4;
  s.original_max_position_embeddings = 128;
  s.mscale = 1;
  s.mscale_all_dim = 1;
  return s;
}

// MLA over the committed cache and this step's rows [latent C | rope key R] (H heads).
Expect mla(CaseBuilder& c, int64_t H, int64_t C, int64_t R) {
  Value* ql = heads(c, c.input(H * C), H, C);
  Value* qr = heads(c, c.input(H * R), H, R);
  Value* kv = c.b().kv_append(c.cache(), {c.b().concat({c.input(C), c.input(R, 0.5f)}, 1)});
  std::vector<Value*> operands = {ql, qr, kv};
  if (c.tree_mask()) operands.push_back(c.tree_mask());
  ir::Attrs a;
  a.set("scale", 0.125);
  a.set("kv_lora_rank", C);
  c.output(c.b().create(OpKind::MlaAttention, operands, a)->result());
  return std::nullopt;
}

// Routed experts after the router (the router's ids and weights feed them).
Expect moe(CaseBuilder& c, bool int4, int64_t H, int64_t I, int64_t E, int64_t K) {
  Value* x = c.input(H);
  auto [w, ids] = c.b().moe_router(c.input(E, 4.f), c.weight_f32({E}, 0.5f), router_attrs(K, 1, 1, true, 2.5));
  if (!int4) {
    Value* g = c.stack_bf16(E, I, H, 0.3f);
    Value* u = c.stack_bf16(E, I, H, 0.3f);
    Value* d = c.stack_bf16(E, H, I, 0.3f);
    c.output(c.b().create(OpKind::MoeExperts, {x, w, ids, g, u, d})->result());
  } else {
    auto [gp, gs] = c.stack_int4(E, I, H, 0.3f);
    auto [up, us] = c.stack_int4(E, I, H, 0.3f);
    auto [dp, ds] = c.stack_int4(E, H, I, 0.3f);
    ir::Attrs a;
    a.set("group_size", int64_t{32});
    c.output(c.b().create(OpKind::MoeExpertsInt4, {x, w, ids, gp, gs, up, us, dp, ds}, a)->result());
  }
  return std::nullopt;
}

// ---- independent expectations (ir/OPS.md, written out plainly) --------------------------

std::vector<float> softmax_weights(const std::vector<double>& logits) {
  double m = -std::numeric_limits<double>::infinity(), z = 0;
  for (double l : logits) m = std::max(m, l);
  std::vector<float> p;
  for (double l : logits) z += std::exp(l - m);
  for (double l : logits) p.push_back(static_cast<float>(std::exp(l - m) / z));
  return p;
}

// Ranks of row r by (value desc, index asc).
std::vector<int64_t> ranked(const Matrix& x, int64_t r) {
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < x.cols; ++i) {
    size_t at = 0;
    while (at < idx.size() && (x.row(r)[idx[at]] > x.row(r)[i] || (x.row(r)[idx[at]] == x.row(r)[i] && idx[at] < i))) ++at;
    idx.insert(idx.begin() + static_cast<int64_t>(at), i);
  }
  return idx;
}

Expect gqa(CaseBuilder& c, int64_t Hq, int64_t Hkv, int64_t D) {
  Matrix q, k, v;
  Value* qv = heads(c, c.input(Hq * D, 1.f, &q), Hq, D);
  Value* kv = heads(c, c.input(Hkv * D, 1.f, &k), Hkv, D);
  Value* vv = heads(c, c.input(Hkv * D, 1.f, &v), Hkv, D);
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  c.output(c.b().gqa_attention(qv, kv, vv, scale));
  const int64_t n = c.step().tokens;
  std::vector<float> want;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hkv);
      std::vector<double> l;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q.row(t)[h * D + d]) * k.row(j)[g * D + d];
        l.push_back(dot * scale);
      }
      const std::vector<float> p = softmax_weights(l);
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += p[j] * v.row(j)[g * D + d];
        want.push_back(static_cast<float>(acc));
      }
    }
  return want;
}

// The naive MLA: keys and values per head from the cache rows [k_nope(H*Dn) | k_rope(Dr) | v(H*Dv)].
Expect mla_expanded(CaseBuilder& c, int64_t H, int64_t Dn, int64_t Dr, int64_t Dv) {
  Matrix qn, qr, kn, kr, vv;
  Value* q_nope = heads(c, c.input(H * Dn, 1.f, &qn), H, Dn);
  Value* q_rope = heads(c, c.input(H * Dr, 1.f, &qr), H, Dr);
  Value* kv = c.b().kv_append(c.cache(), {c.b().concat({c.input(H * Dn, 1.f, &kn), c.input(Dr, 1.f, &kr), c.input(H * Dv, 1.f, &vv)}, 1)});
  const Dim N = kv->type().shape[0];
  Value* k_nope = c.b().reshape(c.b().slice(kv, 1, 0, H * Dn), {N, H, Dn});
  Value* k_rope = c.b().slice(kv, 1, H * Dn, Dr);
  Value* v = c.b().reshape(c.b().slice(kv, 1, H * Dn + Dr, H * Dv), {N, H, Dv});
  std::vector<Value*> operands = {q_nope, q_rope, k_nope, k_rope, v};
  if (c.tree_mask()) operands.push_back(c.tree_mask());
  ir::Attrs a;
  a.set("scale", 0.2);
  c.output(c.b().create(OpKind::MlaAttentionExpanded, operands, a)->result());
  const StepData& s = c.step();
  auto row = [&](int64_t j, int64_t col) -> float {  // column `col` of key row j (cache, then step)
    if (j < s.past) return s.cache.row(j)[col];
    const int64_t t = j - s.past;
    if (col < H * Dn) return kn.row(t)[col];
    if (col < H * Dn + Dr) return kr.row(t)[col - H * Dn];
    return vv.row(t)[col - H * Dn - Dr];
  };
  std::vector<float> want;
  for (int64_t t = 0; t < s.tokens; ++t)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> l;
      std::vector<int64_t> keys;
      for (int64_t j = 0; j < s.past + s.tokens; ++j) {
        if (j >= s.past && !(s.mask == Mask::Tree ? mask_bit(s.tree_mask, s.tokens, t, j - s.past) : j - s.past <= t)) continue;
        double dot = 0;
        for (int64_t d = 0; d < Dn; ++d) dot += static_cast<double>(qn.row(t)[h * Dn + d]) * row(j, h * Dn + d);
        for (int64_t d = 0; d < Dr; ++d) dot += static_cast<double>(qr.row(t)[h * Dr + d]) * row(j, H * Dn + d);
        l.push_back(dot * 0.2);
        keys.push_back(j);
      }
      const std::vector<float> p = softmax_weights(l);
      for (int64_t d = 0; d < Dv; ++d) {
        double acc = 0;
        for (size_t q = 0; q < keys.size(); ++q) acc += p[q] * row(keys[q], H * Dn + Dr + h * Dv + d);
        want.push_back(static_cast<float>(acc));
      }
    }
  return want;
}

// Rows of x [T, V] (a random input) through one sampling op.
enum class Sample { Argmax, TopKValues, TopKIds, LogSoftmax };
Expect sample(CaseBuilder& c, Sample what, int64_t V, int64_t K) {
  Matrix x;
  Value* in = c.input(V, 4.f, &x);
  ir::Attrs a;
  if (what == Sample::TopKValues || what == Sample::TopKIds) a.set("k", K);
  const OpKind kind = what == Sample::Argmax ? OpKind::Argmax : what == Sample::LogSoftmax ? OpKind::LogSoftmax : OpKind::TopK;
  ir::Op* op = c.b().create(kind, {in}, a);
  c.output(op->result(what == Sample::TopKIds ? 1 : 0));
  std::vector<float> want;
  for (int64_t r = 0; r < x.rows; ++r) {
    const std::vector<int64_t> order = ranked(x, r);
    if (what == Sample::Argmax) want.push_back(static_cast<float>(order[0]));
    for (int64_t j = 0; j < K && what != Sample::Argmax && what != Sample::LogSoftmax; ++j)
      want.push_back(what == Sample::TopKIds ? static_cast<float>(order[j]) : x.row(r)[order[j]]);
    if (what == Sample::LogSoftmax) {
      double z = 0;
      const float m = x.row(r)[order[0]];
      for (int64_t i = 0; i < V; ++i) z += std::exp(static_cast<double>(x.row(r)[i]) - m);
      for (int64_t i = 0; i < V; ++i) want.push_back(static_cast<float>(x.row(r)[i] - m - std::log(z)));
    }
  }
  return want;
}

// kv_compact: the cache rows, then the kept step rows in order.
Expect compact(CaseBuilder& c, int64_t D) {
  Matrix step;
  c.output(c.b().kv_compact(c.cache(), c.input(D, 1.f, &step), c.keep()));
  std::vector<float> want = c.step().cache.data;
  for (int32_t k : c.step().keep) want.insert(want.end(), step.row(k), step.row(k) + D);
  return want;
}

std::vector<OpCase> make_table() {
  const bool cpu_only = false;  // lowered = false
  std::vector<OpCase> t = {
      {"embedding/h48", 6, 0, 0, Mask::None, {}, 1e-6, true, [](CaseBuilder& c) -> Expect { c.output(c.input(48)); return std::nullopt; }},
      {"rms_norm/d333_t5", 5, 0, 0, Mask::None, {}, 1e-5, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().rms_norm(c.input(333, 3.f), c.weight_bf16({333}, 1.f), 1e-6)); return std::nullopt; }},
      {"rms_norm/d64_t1", 1, 0, 0, Mask::None, {}, 1e-5, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().rms_norm(c.input(64), c.weight_bf16({64}, 1.f), 1e-5)); return std::nullopt; }},
      {"matmul/k256_n130_t17", 17, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().matmul(c.input(256), c.weight_bf16({130, 256}, 0.2f))); return std::nullopt; }},
      {"matmul/k96_n8_t1", 1, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().matmul(c.input(96), c.weight_bf16({8, 96}, 0.2f))); return std::nullopt; }},
      {"lm_head/v200_t3", 3, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().lm_head(c.input(64), c.weight_bf16({200, 64}, 0.2f))); return std::nullopt; }},
      {"matmul_int4/k256_n40_t9", 9, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect {
         auto [p, s] = c.weight_int4(40, 256, 0.5f);
         c.output(c.b().matmul_int4(c.input(256), p, s, 32));
         return std::nullopt;
       }},
      {"head_matmul/h4_k32_n48", 3, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().head_matmul(heads(c, c.input(4 * 32), 4, 32), c.weight_bf16({4, 48, 32}, 0.3f))); return std::nullopt; }},
      // The absorbed W_UK: a transposed weight view, read as [K, N] without a copy.
      {"head_matmul/transposed_weight_h6_k24_n40", 2, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) -> Expect {
         Value* w = c.b().transpose(c.weight_bf16({6, 24, 40}, 0.3f), {0, 2, 1});
         c.output(c.b().head_matmul(heads(c, c.input(6 * 24), 6, 24), w));
         return std::nullopt;
       }},
      {"add/d100_t4", 4, 0, 0, Mask::None, {}, 1e-6, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().add(c.input(100), c.input(100))); return std::nullopt; }},
      // gate and up as the two halves of one fused projection: strided slices.
      {"swiglu/slices_i333_t4", 4, 0, 0, Mask::None, {}, 1e-5, true,
       [](CaseBuilder& c) -> Expect {
         Value* x = c.input(666, 3.f);
         c.output(c.b().swiglu(c.b().slice(x, 1, 0, 333), c.b().slice(x, 1, 333, 333)));
         return std::nullopt;
       }},
      {"rope/yarn_interleaved_h4_d16_pos300", 5, 300, 0, Mask::None, {}, 2e-4, true,
       [](CaseBuilder& c) -> Expect {
         c.output(c.b().rope(heads(c, c.input(4 * 16), 4, 16), c.positions(), rope_attrs(10000.0, yarn_scaling(), true)));
         return std::nullopt;
       }},
      {"rope/plain_rotate_half_d40_tree", 9, 17, 0, Mask::Tree, {}, 2e-4, true,
       [](CaseBuilder& c) -> Expect {
         c.output(c.b().rope(c.input(40), c.positions(), rope_attrs(5000.0, RopeScaling{}, false)));
         return std::nullopt;
       }},
      {"kv_append/c16_r8_past7", 5, 7, 24, Mask::None, {}, 1e-6, true,
       [](CaseBuilder& c) -> Expect { c.output(c.b().kv_append(c.cache(), {c.b().concat({c.input(16), c.input(8)}, 1)})); return std::nullopt; }},
      {"mla_attention/causal_h4_c48_r8_past9", 5, 9, 56, Mask::Causal, {}, 1e-4, true,
       [](CaseBuilder& c) { return mla(c, 4, 48, 8); }},
      {"mla_attention/tree40_h2_c32_r16_past11", 40, 11, 48, Mask::Tree, {}, 1e-4, true,
       [](CaseBuilder& c) { return mla(c, 2, 32, 16); }},
      {"mla_attention/tree7_empty_cache", 7, 0, 40, Mask::Tree, {}, 1e-4, true, [](CaseBuilder& c) { return mla(c, 3, 32, 8); }},
      {"moe_router/e8_k2", 7, 0, 0, Mask::None, {}, 1e-5, true,
       [](CaseBuilder& c) -> Expect {
         c.output(c.b().moe_router(c.input(8, 4.f), c.weight_f32({8}, 0.5f), router_attrs(2, 1, 1, true, 2.5)).first);
         return std::nullopt;
       }},
      {"moe_router/e16_k4_groups4_top2_unnormed", 7, 0, 0, Mask::None, {}, 1e-5, true,
       [](CaseBuilder& c) -> Expect {
         c.output(c.b().moe_router(c.input(16, 4.f), c.weight_f32({16}, 0.5f), router_attrs(4, 4, 2, false, 1.5)).first);
         return std::nullopt;
       }},
      {"moe_experts/bf16_h64_i32_e6_k2", 5, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, false, 64, 32, 6, 2); }},
      {"moe_experts_int4/h64_i32_e6_k3", 5, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, true, 64, 32, 6, 3); }},
      // The expert-grouped kernels (moe_grouped.cuh): 1 token; many tokens per expert (17 and 64
      // tokens over 3-6 experts: pair chunks of NT past the first); bf16 rows of odd length (the
      // one-element path) with I = 37 and H = 75 not multiples of the 16 / 32-row tiles; INT4 rows
      // over two staged column chunks (H = 1056 = 1024 + 32). Clamped ids are the GPU test's (the
      // CPU op refuses them).
      {"moe_experts/bf16_h72_i40_e4_k2_t1", 1, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, false, 72, 40, 4, 2); }},
      {"moe_experts/bf16_odd_h75_i37_e5_k2_t17", 17, 0, 0, Mask::None, {}, 1e-4, true,
       [](CaseBuilder& c) { return moe(c, false, 75, 37, 5, 2); }},
      {"moe_experts/bf16_h48_i24_e3_k2_t64", 64, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, false, 48, 24, 3, 2); }},
      {"moe_experts_int4/h96_i64_e8_k4_t1", 1, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, true, 96, 64, 8, 4); }},
      {"moe_experts_int4/h1056_i96_e6_k3_t17", 17, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, true, 1056, 96, 6, 3); }},
      {"moe_experts_int4/h64_i160_e4_k2_t64", 64, 0, 0, Mask::None, {}, 1e-4, true, [](CaseBuilder& c) { return moe(c, true, 64, 160, 4, 2); }},
      // Lowered, and also checked against ir/OPS.md written out (the expectation is kept).
      {"topk/values_v50_k4", 4, 0, 0, Mask::None, {}, 1e-6, true, [](CaseBuilder& c) { return sample(c, Sample::TopKValues, 50, 4); }},
      // No GPU lowering yet for these rows (kernels exist for gqa_attention, argmax and topk ids,
      // but the lowering does not emit them as a function's float output): checked against
      // ir/OPS.md written out here.
      {"gqa_attention/hq6_hkv2_d16", 8, 0, 0, Mask::None, {}, 1e-5, cpu_only, [](CaseBuilder& c) { return gqa(c, 6, 2, 16); }},
      {"mla_attention_expanded/tree_h2_dn16_dr8_dv12", 6, 5, 2 * 16 + 8 + 2 * 12, Mask::Tree, {}, 1e-5, cpu_only,
       [](CaseBuilder& c) { return mla_expanded(c, 2, 16, 8, 12); }},
      {"mla_attention_expanded/causal", 4, 3, 2 * 16 + 8 + 2 * 12, Mask::Causal, {}, 1e-5, cpu_only,
       [](CaseBuilder& c) { return mla_expanded(c, 2, 16, 8, 12); }},

      // kv_compact lowers only inside @target_commit, over the cache's own pending rows
      // (lower_emulated_test runs that bucket); with computed step rows the lowering refuses it.
      {"kv_compact/keep_path", 6, 4, 24, Mask::None, {0, 2, 3, 5}, 1e-6, cpu_only, [](CaseBuilder& c) { return compact(c, 24); }},
      {"argmax/v50", 4, 0, 0, Mask::None, {}, 1e-6, cpu_only, [](CaseBuilder& c) { return sample(c, Sample::Argmax, 50, 1); }},

      {"topk/ids_v50_k4", 4, 0, 0, Mask::None, {}, 1e-6, cpu_only, [](CaseBuilder& c) { return sample(c, Sample::TopKIds, 50, 4); }},
      {"log_softmax/v50", 3, 0, 0, Mask::None, {}, 1e-5, cpu_only, [](CaseBuilder& c) { return sample(c, Sample::LogSoftmax, 50, 0); }},
  };
  return t;
}

}  // namespace

const std::vector<OpCase>& op_table() {
  static const std::vector<OpCase> table = make_table();
  return table;
}

}  // namespace kplan::ops_test
