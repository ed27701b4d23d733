#include "compiler/passes/op_rules.h"

#include <algorithm>
#include <optional>

#include "compiler/codegen/families/all.h"
#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/codegen/rope_args.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

using namespace codegen;
using ir::OpKind;
using ir::Value;
using plan::LaunchArg;

constexpr ElemType kF32 = ElemType::F32;

// The op's i-th instance: the recorded one when emitting, else `make()` (recorded).
template <class Make>
KernelSource instance(RuleContext& ctx, size_t i, Make make) {
  if (ctx.selected) {
    if (i >= ctx.selected->size()) throw Error("codegen: select-kernels recorded no kernel " + std::to_string(i) + " for op " + std::to_string(ctx.op_index));
    return (*ctx.selected)[i];
  }
  ctx.chosen.push_back(make());
  return ctx.chosen.back();
}

// One launch of `k`; `A` is its family's Args (a mismatch is refused here, a swapped or missing
// argument does not compile).
template <class A>
void launch(RuleContext& ctx, const KernelSource& k, int64_t rows, const A& typed, int64_t batch = 1) {
  static const std::vector<KernelArg> signature = signature_of<A>();
  if (signature != k.signature) throw Error("codegen: launch of " + k.id + " with another family's arguments");
  LaunchArgs a = launch_arguments(typed);
  ctx.launches.push_back({k, rows, batch, std::move(a.args), std::move(a.tensor_maps)});
}

Rows rows_of(const RuleContext& ctx, const ir::Op& op, const View& v) {
  const std::optional<Rows> r = as_rows(v);
  if (!r || (v.dtype != DType::F32 && v.dtype != DType::BF16))
    throw Error("codegen: " + ctx.where(op) + " reads a strided view no kernel addresses");
  return *r;
}

const View& bf16_weight(const RuleContext& ctx, const ir::Op& op, const Value* v) {
  const View& w = ctx.view(v);
  const bool is_weight = w.root && w.root->defining_op() &&
                         (w.root->defining_op()->kind() == OpKind::Weight || w.root->defining_op()->kind() == OpKind::WeightStack);
  if (!is_weight || w.dtype != DType::BF16) throw Error("codegen: " + ctx.where(op) + " needs a bf16 weight, got " + v->type().str());
  return w;
}

LaunchArg step(plan::StepInputKind k) { return LaunchArg::step_input(k); }

// How a dense [N, K] bf16 matmul runs a step of `rows` tokens: on the CUDA cores (1-token steps,
// small weights, steps under the arch's tensor-core threshold), as rows-as-M tensor-core tiles
// (from the threshold up to heuristics' matmul_rows_m_max_tokens: token tiles of 8 or 16 as
// mma's N, kernels_templates/matmul.cuh MMA 2), as tokens-as-M tiles (MMA 1, the longer steps),
// or, where the plan may call cuBLASLt for it (library_reachable), as that call from
// heuristics' matmul_library_min_tokens on.
enum class DensePath { CudaCores, RowsAsM, TokensAsM, Library };
int64_t dense_matmul_mma_min(const RuleContext& ctx, int64_t k, int64_t n) { return k % 8 == 0 ? matmul_mma_min_tokens(ctx.arch, n, k) : 0; }
// Whether some step may take the rows-as-M tiles (their instances exist only then).
bool rows_m_reachable(const RuleContext& ctx, int64_t k, int64_t n) {
  const int64_t mma_min = dense_matmul_mma_min(ctx, k, n);
  return mma_min > 0 && std::max<int64_t>(mma_min, 2) <= matmul_rows_m_max_tokens(ctx.arch);
}
struct MatmulFusions {
  bool acc = false;        // the epilogue adds a residual (ACC 1)
  int64_t routed = 0;      // and a MoE's per-pair rows, that many a token (ROUTED: its combine)
  int64_t norm = 0;        // 1 / 2 / 3: the CUDA-core and rows-as-M instances read rms_norm(x) from x stored as norm_x
  ElemType norm_x = kF32;  // (NORM, norm_matmuls.h); the tokens-as-M ones read the norm's stored result as x_t
  int64_t norm_threads = 0;  // NORM 3: the norm launch's block, which an instance's must be (else it reads the result)
  bool batched = false;    // a head_matmul's launch, batched over heads (grid.z)
  int64_t batches = 1;     // and its heads
};
// Whether the steps of heuristics' matmul_library_min_tokens tokens on are cuBLASLt calls
// (families/cublaslt_matmul.h) in this plan: a tensor-core weight, bf16 activations x_t
// (cuBLASLt multiplies A and B of one type), no MoE combine in the epilogue, no batch over heads,
// and a bucket that long.
bool library_reachable(const RuleContext& ctx, int64_t k, int64_t n, ElemType x_t, const MatmulFusions& f) {
  const int64_t min = matmul_library_min_tokens(ctx.arch);
  return min > 0 && ctx.max_tokens >= min && dense_matmul_mma_min(ctx, k, n) > 0 && x_t == ElemType::BF16 && f.routed == 0 && !f.batched;
}
DensePath dense_matmul_path(const RuleContext& ctx, int64_t k, int64_t n, int64_t rows, bool library) {
  const int64_t mma_min = dense_matmul_mma_min(ctx, k, n);
  if (mma_min <= 0 || rows <= 1 || rows < mma_min) return DensePath::CudaCores;
  if (library && rows >= matmul_library_min_tokens(ctx.arch)) return DensePath::Library;
  if (rows <= matmul_rows_m_max_tokens(ctx.arch)) return DensePath::RowsAsM;
  return rows < 16 ? DensePath::CudaCores : DensePath::TokensAsM;
}
// The rows-as-M token tile of a step: 8, or 16 (tiles side by side past 16: 16 tokens a tile
// measured ahead of 32, bench/RESULTS.md 2026-12-06 04:20).
int64_t rows_m_tile(int64_t rows) { return rows <= 8 ? 8 : 16; }

// The instances of a dense [N, K] matmul, chosen once at select-kernels (each bucket picks by its
// token count): 0 streams W on the CUDA cores for 1-token steps (token tiles of 1), 1 for steps of
// 2 to 8 tokens (tiles of 2), 2 for 9 tokens on (tiles of 8); where the arch takes the tensor cores
// for this weight, 3 (token tiles of 16: steps of 16 to 63 tokens, tiles side by side) and 4 (tiles
// of 64; for 4096+ rows where the arch measured it: tiles of 16 tokens, 32 rows a warp,
// heuristics' matmul_wide_long_steps) put the tokens as mma's M, where rows-as-M steps are
// reachable 5 and 6 put the rows as its M with token tiles of 8 and 16, and where library_reachable
// the last is the cuBLASLt call of the steps from matmul_library_min_tokens on.
// `base`: the index of the op's first instance here (dense_matmul_instances of them: a sibling
// group records each member's after the fused ones). `f`: what the instances fuse.
size_t dense_matmul_instances(const RuleContext& ctx, int64_t k, int64_t n, ElemType x_t, const MatmulFusions& f) {
  const size_t own = dense_matmul_mma_min(ctx, k, n) <= 0 ? 3 : rows_m_reachable(ctx, k, n) ? 7 : 5;
  return own + (library_reachable(ctx, k, n, x_t, f) ? 1 : 0);
}
KernelSource dense_matmul_instance(RuleContext& ctx, int64_t k, int64_t n, int64_t rows, ElemType x_t, ElemType y_t,
                                   const MatmulFusions& f = {}, size_t base = 0) {
  const ElemType cc_x = f.norm ? f.norm_x : x_t;
  // A matmul that computes its norm asks L2 for its weight as it did after the norm's own launch
  // (a light one): its blocks' norm is the latency the prefetch fills (q_b's after q_a + kv_a).
  const int64_t prev_weight_bytes = f.norm ? 0 : ctx.prev_launch_weight_bytes;
  const int64_t pf = weight_prefetch_after_light_kib(prev_weight_bytes, 2 * n * k, f.batches);
  // NORM 3 only where the instance's block is the norm launch's (bit for bit its sums): else the
  // same instance unfused, reading the norm's result (the launch's rule launches the norm first).
  auto exact_or_unfused = [&](auto make) {
    KernelSource s = make(cc_x, f.norm);
    if (f.norm == 3 && 32 * kernel_param(s, "WARPS") != f.norm_threads) s = make(x_t, int64_t{0});
    return s;
  };
  auto cc = [&](int64_t few) {
    return exact_or_unfused([&](ElemType xt, int64_t norm) { return matmul_kernel(k, n, xt, y_t, false, f.acc, ctx.arch, 0, few, 0, norm, f.routed, pf); });
  };
  const KernelSource one = instance(ctx, base, [&] { return cc(1); });
  const KernelSource two = instance(ctx, base + 1, [&] { return cc(2); });
  const KernelSource eight = instance(ctx, base + 2, [&] { return cc(0); });
  const KernelSource cuda_cores = rows <= 1 ? one : rows <= 8 ? two : eight;
  if (dense_matmul_mma_min(ctx, k, n) <= 0) return cuda_cores;
  const KernelSource mma16 = instance(ctx, base + 3, [&] { return matmul_kernel(k, n, x_t, y_t, false, f.acc, ctx.arch, 16, 0, 0, 0, f.routed, pf); });
  const KernelSource mma64 = instance(ctx, base + 4, [&] {
    return matmul_wide_long_steps(ctx.arch, n) ? matmul_kernel(k, n, x_t, y_t, false, f.acc, ctx.arch, 16, 0, 32, 0, f.routed, pf)
                                               : matmul_kernel(k, n, x_t, y_t, false, f.acc, ctx.arch, 64, 0, 0, 0, f.routed, pf);
  });
  KernelSource rows_m;
  if (rows_m_reachable(ctx, k, n)) {
    size_t i = base + 5;
    for (const int64_t tile : {int64_t{8}, int64_t{16}}) {
      KernelSource r = instance(ctx, i++, [&] {
        return exact_or_unfused([&](ElemType xt, int64_t norm) { return matmul_rows_m_kernel(k, n, xt, y_t, f.acc, ctx.arch, tile, norm, f.routed, pf); });
      });
      if (rows_m_tile(rows) == tile) rows_m = std::move(r);
    }
  }
  const size_t library_index = base + (rows_m_reachable(ctx, k, n) ? 7 : 5);
  const std::optional<KernelSource> library =
      library_reachable(ctx, k, n, x_t, f)
          ? std::optional(instance(ctx, library_index, [&] { return cublaslt_matmul_call(k, n, y_t, f.acc, ctx.arch); }))
          : std::nullopt;
  switch (dense_matmul_path(ctx, k, n, rows, library.has_value())) {
    case DensePath::CudaCores: return cuda_cores;
    case DensePath::RowsAsM: return rows_m;
    case DensePath::Library: return *library;
    case DensePath::TokensAsM: break;
  }
  return rows < 64 ? mma16 : mma64;
}

// A dense matmul's launch of `k`: the template's arguments, or where `k` is the cuBLASLt call
// (dense_matmul_instance) the call's share of them (no batch, no norm, no routed rows).
void launch_dense(RuleContext& ctx, const KernelSource& k, int64_t rows, const matmul::Args& a) {
  if (k.library.empty()) return launch(ctx, k, rows, a);
  launch(ctx, k, rows,
         cublaslt_matmul::Args{.x = a.x, .w = a.w, .y = a.y, .residual = a.residual, .n_tokens = a.n_tokens,
                               .x_row_stride = a.x_row_stride, .y_row_stride = a.y_row_stride});
}

// A MoE op's experts per token, and where its down kernel leaves the per-pair rows: its scratch
// holds h [T * top_k, inter] f32, then the rows [T * top_k, hidden] f32 (scratch_bytes).
int64_t moe_top_k(const ir::Op& moe) { return moe.operand(2)->type().shape.at(1).constant; }
LaunchArg moe_partial_rows(RuleContext& ctx, const ir::Op& moe, int64_t rows) {
  LaunchArg partial = ctx.scratch(moe);
  partial.offset += 4 * static_cast<uint64_t>(rows * moe_top_k(moe) * moe.operand(3)->type().shape.at(1).constant);
  return partial;
}

// An rms_norm op's launch, its kernel the op's instance `index` (its own rule: 0; the rule of a
// matmul whose launch computes it elsewhere, norm_matmuls.h: after the matmul's own).
void launch_rms_norm(const ir::Op& op, RuleContext& ctx, size_t index) {
  const View& in = ctx.view(op.operand(0));
  const View& out = ctx.view(op.result());
  const Rows x = rows_of(ctx, op, in);
  const View& w = bf16_weight(ctx, op, op.operand(1));
  const KernelSource k = instance(ctx, index, [&] { return rms_norm_kernel(x.width, elem(in), elem(out), ctx.arch); });
  launch(ctx, k, x.rows,
         rms_norm::Args{.x = ctx.ptr(in), .weight = ctx.ptr(w), .y = ctx.ptr(out), .n_rows = x.rows, .x_stride = x.stride,
                        .y_stride = x.width, .eps = op.attrs().get_float("eps")});
}

// What a launch that computes ctx.norm reads (norm_matmuls.h): the norm's input rows and weight.
struct NormInput {
  const View* x = nullptr;
  Rows rows;
  const View* weight = nullptr;
  int64_t mode = 0;  // the templates' NORM: 0 none, 1 the norm, 2 the norm with its result stored, 3 rounded first (exact)
  float eps = 0.f;
  int64_t threads = 0;  // the norm launch's block (NORM 3's instances must match it)
};
NormInput norm_input(const RuleContext& ctx) {
  if (!ctx.norm) return {};
  const ir::Op& norm = *ctx.norm->norm;
  NormInput in{&ctx.view(norm.operand(0)), {}, &bf16_weight(ctx, norm, norm.operand(1)), ctx.norm->exact ? 3 : ctx.norm->store ? 2 : 1,
               static_cast<float>(norm.attrs().get_float("eps"))};
  in.rows = rows_of(ctx, norm, *in.x);
  if (in.weight->shape.back() != in.rows.width) throw Error("codegen: rms_norm weight width (" + ctx.where(norm) + ")");
  if (ctx.norm->exact)
    in.threads = kernel_param(rms_norm_kernel(in.rows.width, elem(*in.x), elem(ctx.view(norm.result())), ctx.arch), "THREADS");
  return in;
}

// A swiglu op's launch, its kernel the op's instance `index` (its own rule: 0; a sibling group's
// that computes it: after the members' own).
void launch_swiglu(const ir::Op& op, RuleContext& ctx, size_t index) {
  const View& gate = ctx.view(op.operand(0));
  const View& up = ctx.view(op.operand(1));
  const View& out = ctx.view(op.result());
  const Rows g = rows_of(ctx, op, gate);
  const Rows u = rows_of(ctx, op, up);
  const KernelSource k = instance(ctx, index, [&] { return swiglu_kernel(g.width, elem(gate), elem(up), elem(out), ctx.arch); });
  launch(ctx, k, g.rows,
         swiglu::Args{.gate = ctx.ptr(gate), .up = ctx.ptr(up), .out = ctx.ptr(out), .n_tokens = g.rows, .gate_row_stride = g.stride,
                      .up_row_stride = u.stride, .out_row_stride = g.width});
}

// Whether a sibling group (`first` and its `later` members) launches as one at this step: on its
// rows-as-M tiles, or on the CUDA cores where every member's step would be (else each member
// launches its own).
bool siblings_launch_together(const RuleContext& ctx, const ir::Op& first, const std::vector<const ir::Op*>& later) {
  const Rows x = rows_of(ctx, first, ctx.view(first.operand(0)));
  const ElemType x_t = elem(ctx.view(first.operand(0)));
  std::vector<int64_t> rows = {bf16_weight(ctx, first, first.operand(1)).shape[0]};
  for (const ir::Op* m : later) rows.push_back(bf16_weight(ctx, *m, m->operand(1)).shape[0]);
  int64_t group_rows = 0;
  bool library = true;
  for (const int64_t n : rows) {
    group_rows += n;
    library = library && library_reachable(ctx, x.width, n, x_t, {});
  }
  if (dense_matmul_path(ctx, x.width, group_rows, x.rows, library) == DensePath::RowsAsM) return true;
  for (const int64_t n : rows)
    if (dense_matmul_path(ctx, x.width, n, x.rows, library_reachable(ctx, x.width, n, x_t, {})) != DensePath::CudaCores) return false;
  return true;
}

// A sibling group (sibling_matmuls.h): `op` and ctx.siblings, [N_i, K] weights of the same
// activations. Instances 0..2 are the fused launch's (token tiles of 1, 2, 8: the dense matmul's
// CUDA-core steps), 3 and 4 its rows-as-M ones (token tiles of 8 and 16) where the group's rows
// taken together reach such steps, then each member's own dense instances, for the steps where
// some member takes the tokens-as-M tiles: there every member launches its own (and, with
// ctx.glu, the swiglu of the last two after them: the last instance). With ctx.glu the fused launch writes the
// swiglu's result instead of the last two siblings' (GLU 1: W2, W3 the gate and up; a group of
// two passes no plain sibling, N 0). With ctx.norm the fused launch reads the norm's input and
// computes it (NORM 1 / 2); where the members launch one by one the norm launches first (its
// instance after the members', before the swiglu's). With ctx.route the fused launch routes the
// step too (ROUTE_K); where the members launch one by one the experts' gate/up routes it.
void lower_sibling_matmuls(const ir::Op& op, RuleContext& ctx) {
  auto P = [&](const View& v) { return ctx.ptr(v); };
  std::vector<const ir::Op*> members = {&op};
  members.insert(members.end(), ctx.siblings->begin(), ctx.siblings->end());
  const Rows x = rows_of(ctx, op, ctx.view(op.operand(0)));
  const ElemType x_t = elem(ctx.view(op.operand(0)));
  std::vector<const View*> w, y;
  for (const ir::Op* m : members) {
    w.push_back(&bf16_weight(ctx, *m, m->operand(1)));
    y.push_back(&ctx.view(m->result()));
    if (w.back()->shape[1] != x.width) throw Error("codegen: sibling matmul weight layout (" + ctx.where(*m) + ")");
  }
  // The later siblings' one dtype; the first's may be f32 beside them (a router's logits: YA_F32).
  const ElemType y_t = elem(*y[1]);
  const bool first_f32 = elem(*y[0]) != y_t;
  const size_t third = members.size() > 2 ? 2 : 1;  // an absent third: the second's pointers, unread
  // The fused launch's W2 and W3 (GLU: the gate and up, after the plain sibling if any; a group
  // of two has none, N 0) and their rows (an absent third: 0).
  const bool glu = ctx.glu != nullptr;
  const size_t second = glu ? members.size() - 2 : 1, last = glu ? second + 1 : third;
  const int64_t na = glu && members.size() == 2 ? 0 : w[0]->shape[0], nb = w[second]->shape[0],
                nc = glu || members.size() > 2 ? w[last]->shape[0] : 0;
  const NormInput norm = norm_input(ctx);
  // With ctx.route (router_experts.h) the fused launch routes the step too (ROUTE_K).
  const ir::Op* route = ctx.route;
  const int64_t route_k = route ? route->result(1)->type().shape.at(1).constant : 0;
  auto fused = [&](int64_t tokens, int64_t rows_m_tokens = 0) {
    return matmul_siblings_kernel(x.width, na, nb, nc, norm.mode ? elem(*norm.x) : x_t, y_t, ctx.arch, tokens, glu, norm.mode, rows_m_tokens,
                                  first_f32, route_k, route && route->attrs().get_bool("norm_topk_prob"));
  };
  const KernelSource one = instance(ctx, 0, [&] { return fused(1); });
  const KernelSource two = instance(ctx, 1, [&] { return fused(2); });
  const KernelSource eight = instance(ctx, 2, [&] { return fused(0); });
  const int64_t group_rows = na + nb + nc;  // the fused launch's row space
  // Where every member's step is a cuBLASLt call the group launches them one by one.
  bool library = true;
  for (const View* wi : w) library = library && library_reachable(ctx, x.width, wi->shape[0], x_t, {});
  const bool rows_m = dense_matmul_path(ctx, x.width, group_rows, x.rows, library) == DensePath::RowsAsM;
  KernelSource k = x.rows <= 1 ? one : x.rows <= 8 ? two : eight;
  size_t base = 3;
  if (rows_m_reachable(ctx, x.width, group_rows)) {
    for (const int64_t tile : {int64_t{8}, int64_t{16}}) {
      KernelSource r = instance(ctx, base++, [&] { return fused(0, tile); });
      if (rows_m && rows_m_tile(x.rows) == tile) k = std::move(r);
    }
  }
  const bool together = siblings_launch_together(ctx, op, *ctx.siblings);
  std::vector<KernelSource> own;
  const int64_t before_group = ctx.prev_launch_weight_bytes;
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t n = w[i]->shape[0];
    // Launched one by one, a member follows the one before it (its weight's stream).
    ctx.prev_launch_weight_bytes = i == 0 ? before_group : 2 * w[i - 1]->shape[0] * x.width;
    own.push_back(dense_matmul_instance(ctx, x.width, n, x.rows, x_t, elem(*y[i]), {}, base));
    base += dense_matmul_instances(ctx, x.width, n, x_t, {});
  }
  ctx.prev_launch_weight_bytes = before_group;
  if (together) {
    const View& y2 = glu ? ctx.view(ctx.glu->result()) : *y[second];  // GLU: the swiglu's result
    const View& x_in = norm.mode ? *norm.x : ctx.view(op.operand(0));
    launch(ctx, k, x.rows,
           matmul_siblings::Args{.x = P(x_in), .w = P(*w[0]), .w2 = P(*w[second]), .w3 = P(*w[last]), .y = P(*y[0]), .y2 = P(y2),
                                 .y3 = P(*y[last]), .n_tokens = x.rows, .x_row_stride = norm.mode ? norm.rows.stride : x.stride,
                                 .y_row_stride = na, .y2_row_stride = nb, .y3_row_stride = nc,
                                 .norm_weight = P(norm.mode ? *norm.weight : *w[0]), .norm_out = P(ctx.view(op.operand(0))),
                                 .eps = norm.eps, .bias = P(route ? ctx.view(route->operand(1)) : *w[0]),
                                 .topk_ids = P(route ? ctx.view(route->result(1)) : *y[0]),
                                 .topk_weights = P(route ? ctx.view(route->result(0)) : *y[0]),
                                 .route_count = route ? ctx.route_count(*route) : P(*y[0]),
                                 .routed_scaling = route ? static_cast<float>(route->attrs().get_float("routed_scaling_factor")) : 1.f});
    return;
  }
  size_t next = base;
  if (ctx.norm) launch_rms_norm(*ctx.norm->norm, ctx, next++);
  for (size_t i = 0; i < members.size(); ++i) {
    const int64_t n = w[i]->shape[0];
    launch_dense(ctx, own[i], x.rows,
           matmul::Args{.x = P(ctx.view(op.operand(0))), .w = P(*w[i]), .y = P(*y[i]), .residual = P(*y[i]), .n_tokens = x.rows,
                        .x_row_stride = x.stride, .x_batch_stride = 0, .y_row_stride = n, .y_batch_stride = 0, .w_batch_stride = 0,
                        .norm_weight = P(*w[i]), .norm_out = P(*y[i]), .eps = 0.f, .routed = P(*w[i])});
  }
  if (glu) launch_swiglu(*ctx.glu, ctx, next);
}

// The kernel arguments of a rope op's attributes over `dim` rotated columns.
RopeArgs rope_args_of(const ir::Op& rope, int64_t dim) {
  const ir::Attrs& a = rope.attrs();
  const std::string scaling = a.has("scaling") ? a.get_string("scaling") : "none";
  const bool yarn = scaling == "yarn";
  return rope_args(dim, a.get_float("theta"), scaling, yarn ? a.get_float("factor") : 1.0,
                   yarn ? a.get_int("original_max_position_embeddings") : 0, yarn ? a.get_float("beta_fast") : 0,
                   yarn ? a.get_float("beta_slow") : 0, a.get_float("attention_factor"));
}

// A kv_append with its latent norm, key rope and (when present) the queries' rope in one launch
// (rope_append.h): the norm and the key rope are read from their operands, the query rope is
// written to its own result's storage.
// What a fused kv_append's launch computes (rope_append.h): mla_rope_append's arguments and the
// constants of its instance; uk_rope_append's launch passes the same (uk_rope_append.h).
struct RopeAppendLaunch {
  mla_rope_append::Args args;
  int64_t rows, kv_lora, rope, heads;
  bool interleaved;
  ElemType latent, q, cache;
};
RopeAppendLaunch rope_append_launch(const ir::Op& op, const RopeAppend& f, RuleContext& ctx) {
  auto P = [&](const View& v) { return ctx.ptr(v); };
  const View& cache = ctx.view(op.operand(0));
  const View& latent = ctx.view(f.norm->operand(0));
  const View& weight = bf16_weight(ctx, *f.norm, f.norm->operand(1));
  const View& key = ctx.view(f.k_rope->operand(0));
  const Rows l = rows_of(ctx, *f.norm, latent);
  const Rows k = rows_of(ctx, *f.k_rope, key);
  if (key.shape.size() == 3 && key.shape[1] != 1) throw Error("codegen: a key rope over several heads (" + ctx.where(*f.k_rope) + ")");
  if (weight.shape.back() != l.width) throw Error("codegen: rms_norm weight width (" + ctx.where(*f.norm) + ")");
  const int64_t r = key.shape.back();
  const View* qx = f.q_rope ? &ctx.view(f.q_rope->operand(0)) : &key;
  const View* qy = f.q_rope ? &ctx.view(f.q_rope->result()) : &key;
  const int64_t heads = f.q_rope ? (qx->shape.size() == 3 ? qx->shape[1] : 1) : 0;
  auto head_stride = [&](const View& v) { return v.shape.size() == 3 ? v.strides[1] : r; };
  const RopeArgs ra = rope_args_of(*f.k_rope, r);
  return RopeAppendLaunch{
      .args = mla_rope_append::Args{.latent = P(latent), .norm_weight = P(weight), .k_rope_src = P(key), .cache = P(cache),
                                    .cache_len = step(plan::StepInputKind::CacheLength), .q_src = P(*qx), .q_dst = P(*qy),
                                    .positions = P(ctx.view(f.k_rope->operand(1))), .n_tokens = l.rows, .latent_stride = l.stride,
                                    .k_rope_stride = k.stride, .max_slots = cache.shape[0], .q_src_row_stride = qx->strides[0],
                                    .q_src_head_stride = head_stride(*qx), .q_dst_row_stride = qy->strides[0],
                                    .q_dst_head_stride = head_stride(*qy), .eps = f.norm->attrs().get_float("eps"), .theta = ra.theta,
                                    .yarn_factor = ra.yarn_factor, .yarn_low = ra.yarn_low, .yarn_high = ra.yarn_high,
                                    .cos_sin_scale = ra.cos_sin_scale},
      .rows = l.rows,
      .kv_lora = l.width,
      .rope = r,
      .heads = heads,
      .interleaved = f.k_rope->attrs().get_bool("interleaved"),
      .latent = elem(latent),
      .q = elem(*qy),
      .cache = elem(cache)};
}

void lower_rope_append(const ir::Op& op, RuleContext& ctx) {
  const RopeAppendLaunch ra = rope_append_launch(op, *ctx.rope_append, ctx);
  const KernelSource kern = instance(ctx, 0, [&] {
    return mla_rope_append_kernel(ra.kv_lora, ra.rope, ra.heads, ra.interleaved, ra.latent, ra.q, ra.cache, ctx.arch);
  });
  launch(ctx, kern, ra.rows, ra.args);
}

}  // namespace

codegen::ElemType elem(const View& v) {
  if (v.dtype == DType::F32) return codegen::ElemType::F32;
  if (v.dtype == DType::BF16) return codegen::ElemType::BF16;
  throw Error("codegen: activations stored as " + std::string(dtype_name(v.dtype)) + " (kernels read f32 or bf16)");
}

void attach_fusions(const LoweringFusions& fusions, const ir::Op& op, RuleContext& ctx) {
  auto fused = fusions.epilogue.producers.find(&op);
  if (fused != fusions.epilogue.producers.end()) ctx.epilogue = &fused->second;
  auto combined = fusions.epilogue.combined_by.find(&op);
  if (combined != fusions.epilogue.combined_by.end()) ctx.combined_by = combined->second;
  auto later = fusions.siblings.later.find(&op);
  if (later != fusions.siblings.later.end()) ctx.siblings = &later->second;
  auto norm = fusions.norm_matmuls.consumers.find(&op);
  if (norm != fusions.norm_matmuls.consumers.end()) ctx.norm = &norm->second;
  auto router = fusions.router_experts.router_of.find(&op);
  if (router != fusions.router_experts.router_of.end()) {
    ctx.router = router->second;
    auto logits = fusions.router_experts.logits_of.find(router->second);
    if (logits != fusions.router_experts.logits_of.end()) {
      ctx.router_logits = logits->second;
      ctx.router_logits_later = &fusions.siblings.later.at(logits->second);
    }
  }
  auto route = fusions.router_experts.logits_router.find(&op);
  if (route != fusions.router_experts.logits_router.end()) ctx.route = route->second;
  auto uv = fusions.attention_uv.uv_of.find(&op);
  if (uv != fusions.attention_uv.uv_of.end()) ctx.uv = uv->second;
  auto glu = fusions.siblings.glu.find(&op);
  if (glu != fusions.siblings.glu.end()) ctx.glu = glu->second;
  auto append = fusions.rope_append.appends.find(&op);
  if (append != fusions.rope_append.appends.end()) ctx.rope_append = &append->second;
  auto gather = fusions.embedding_norms.gather_of.find(&op);
  if (gather != fusions.embedding_norms.gather_of.end()) ctx.gather = gather->second;
  auto add = fusions.add_norms.add_of.find(&op);
  if (add != fusions.add_norms.add_of.end()) ctx.add = add->second;
  auto uk = fusions.uk_appends.append_of.find(&op);
  if (uk != fusions.uk_appends.append_of.end()) {
    ctx.uk_append = uk->second;
    ctx.uk_rope = &fusions.rope_append.appends.at(uk->second);
  }
}

const View& RuleContext::view(const Value* v) const {
  auto it = views->find(v);
  if (it == views->end()) throw Error("codegen: lowering reached a value with no storage (" + v->type().str() + ")");
  return it->second;
}

std::string RuleContext::where(const ir::Op& op) const { return op_label(*fn, op_index, op); }

uint64_t scratch_bytes(const ir::Op& op, int64_t max_tokens, int64_t max_context, std::string_view arch, DType kv_cache, DType queries) {
  if (op.kind() == OpKind::MlaAttention) {
    if (mla_split_max_tokens(arch) == 0) return 0;
    // The split pair's partials [T, heads, n_splits, C + 2] f32 (the largest T * n_splits of
    // any bucket up to max_tokens that takes the pair).
    const int64_t heads = op.operand(0)->type().shape.at(1).constant, c = op.operand(0)->type().shape.at(2).constant;
    const int64_t r = op.operand(1)->type().shape.at(2).constant;
    const ElemType kv = kv_cache == DType::BF16 ? ElemType::BF16 : ElemType::F32;
    const ElemType q = queries == DType::BF16 ? ElemType::BF16 : ElemType::F32;  // the instance the rule will take
    const KernelSource part = mla_split_partial_kernel(heads, c, r, q, kv, arch);
    const int64_t split_max = mla_split_max_tokens(arch, kernel_param(part, "MMA") >= 2);
    return mla_split_workspace_bytes(part, max_context, std::min(max_tokens, split_max), arch);
  }
  if (op.kind() != OpKind::MoeExperts && op.kind() != OpKind::MoeExpertsInt4) return 0;
  // h [T * top_k, inter] f32 between the grouped gate/up and down kernels, then the down
  // kernel's per-pair rows [T * top_k, hidden] f32 that moe_combine sums.
  const int64_t top_k = op.operand(2)->type().shape.at(1).constant;
  const int64_t inter = op.operand(3)->type().shape.at(1).constant;
  const int64_t hidden = op.operand(0)->type().shape.at(1).constant;
  return 4 * static_cast<uint64_t>(max_tokens * top_k * (inter + hidden));
}

void lower_op(const ir::Op& op, RuleContext& ctx) {
  auto operand = [&](size_t k) -> const View& { return ctx.view(op.operand(k)); };
  auto result = [&](size_t r = 0) -> const View& { return ctx.view(op.result(r)); };
  auto P = [&](const View& v) { return ctx.ptr(v); };
  const std::string& arch = ctx.arch;
  switch (op.kind()) {
    case OpKind::Weight:
    case OpKind::WeightStack:
    case OpKind::Slice:
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Output: return;
    case OpKind::Concat: {
      // A concat read only by kv_append (its parts go to the cache row by row) or outputs is
      // deferred; any other is materialised: each part's rows copied into its column range.
      if (is_deferred_concat(*ctx.fn, op)) return;
      const View& out = result();
      const int64_t axis = op.attrs().get_int("axis");
      if (out.shape.size() != 2 || axis != 1)
        throw Error("codegen: concat along axis " + std::to_string(axis) + " of a rank-" + std::to_string(out.shape.size()) +
                    " value (" + ctx.where(op) + ") has no lowering (only rows side by side)");
      int64_t column = 0;
      for (size_t p = 0; p < op.num_operands(); ++p) {
        const Rows part = rows_of(ctx, op, operand(p));
        View dst = out;
        dst.offset += column;
        const KernelSource k = instance(ctx, p, [&] { return copy_rows_kernel(part.width, elem(operand(p)), elem(out), arch); });
        launch(ctx, k, part.rows,
               copy_rows::Args{.x = P(operand(p)), .y = P(dst), .n_rows = part.rows, .x_stride = part.stride, .y_stride = out.shape[1]});
        column += part.width;
      }
      return;
    }
    case OpKind::LogSoftmax: {
      // Folded into the topk that reads it (log-probabilities out); alone it has no kernel.
      if (is_folded_log_softmax(*ctx.fn, op)) return;
      throw Error("codegen: no GPU lowering for " + ctx.where(op) + " (only as topk's input)");
    }
    case OpKind::GqaAttention: {
      // The drafter's block over [context ; block]: keys and values are a drafter cache whose
      // first *CacheLength rows are the context and the next rows the block's own (kv_append
      // wrote them there), so the kernel reads CacheLength + block rows of the cache.
      const View& q = operand(0);
      const View& k = operand(1);
      const View& v = operand(2);
      for (const View* kv : {&k, &v})
        if (!kv->root || kv->root->defining_op() || !is_cache_arg(kv->root->name()) || kv->shape.size() != 3 ||
            kv->strides[2] != 1 || kv->strides[1] != kv->shape[2] || kv->offset != 0)
          throw Error("codegen: gqa_attention keys and values must be a drafter cache with the block appended (" +
                      ctx.where(op) + ")");
      if (q.shape.size() != 3 || q.strides[2] != 1 || q.strides[1] != q.shape[2])
        throw Error("codegen: gqa_attention query layout (" + ctx.where(op) + ")");
      const int64_t tq = q.shape[0], hq = q.shape[1], d = q.shape[2], hkv = k.shape[1];
      if (v.shape[2] != d) throw Error("codegen: gqa_attention with a value width unlike the key's (" + ctx.where(op) + ")");
      if (v.dtype != k.dtype) throw Error("codegen: gqa_attention keys and values stored in different dtypes (" + ctx.where(op) + ")");
      // The drafter context window: the kernel skips the context keys before CacheLength - N,
      // which needs the block's rows (the queries') to be the keys past the context.
      const int64_t window = op.attrs().has("context_window") ? op.attrs().get_int("context_window") : 0;
      if (window > 0 && k.shape[0] != tq)
        throw Error("codegen: gqa_attention with a context_window needs the queries' own " + std::to_string(tq) +
                    " rows after the context, not " + std::to_string(k.shape[0]) + " (" + ctx.where(op) + ")");
      const KernelSource kern = instance(ctx, 0, [&] { return gqa_attention_kernel(hq, hkv, d, elem(q), elem(k), elem(result()), arch); });
      launch(ctx, kern, tq,
             gqa_attention::Args{.q = P(q), .k = P(k), .v = P(v), .n_keys_base = step(plan::StepInputKind::CacheLength),
                                 .out = P(result()), .n_queries = tq, .n_keys_extra = k.shape[0], .q_row_stride = q.strides[0],
                                 .k_row_stride = k.strides[0], .v_row_stride = v.strides[0], .out_row_stride = hq * d,
                                 .scale = op.attrs().get_float("scale"), .context_window = window});
      return;
    }
    case OpKind::Embedding: {
      const View& table = bf16_weight(ctx, op, op.operand(1));
      const View& out = result();
      const KernelSource k = instance(ctx, 0, [&] { return embedding_kernel(table.shape[1], elem(out), arch); });
      launch(ctx, k, out.shape[0],
             embedding::Args{.ids = P(operand(0)), .table = P(table), .out = P(out), .n_tokens = out.shape[0], .vocab = table.shape[0]});
      return;
    }
    case OpKind::RmsNorm:
      if (ctx.gather) {  // the embedding's gather too (embedding_norm.h)
        const View& table = bf16_weight(ctx, *ctx.gather, ctx.gather->operand(1));
        const View& rows = ctx.view(ctx.gather->result());
        const View& weight = bf16_weight(ctx, op, op.operand(1));
        const KernelSource k = instance(ctx, 0, [&] { return embedding_norm_kernel(table.shape[1], elem(rows), elem(result()), arch); });
        launch(ctx, k, rows.shape[0],
               embedding_norm::Args{.ids = P(ctx.view(ctx.gather->operand(0))), .table = P(table), .out = P(rows), .weight = P(weight),
                                    .y = P(result()), .n_tokens = rows.shape[0], .vocab = table.shape[0],
                                    .eps = op.attrs().get_float("eps")});
        return;
      }
      if (ctx.add) {  // the add before the norm too (add_norm.h)
        const View& a = ctx.view(ctx.add->operand(0));
        const View& b = ctx.view(ctx.add->operand(1));
        const View& sum = ctx.view(ctx.add->result());
        const View& weight = bf16_weight(ctx, op, op.operand(1));
        const KernelSource k = instance(ctx, 0, [&] { return add_norm_kernel(sum.shape[1], elem(a), elem(b), elem(sum), elem(result()), arch); });
        launch(ctx, k, sum.shape[0],
               add_norm::Args{.a = P(a), .b = P(b), .weight = P(weight), .out = P(sum), .y = P(result()), .n_tokens = sum.shape[0],
                              .eps = op.attrs().get_float("eps")});
        return;
      }
      launch_rms_norm(op, ctx, 0);
      return;
    case OpKind::Matmul:
    case OpKind::LmHead: {
      if (ctx.siblings) {
        lower_sibling_matmuls(op, ctx);
        return;
      }
      const Rows x = rows_of(ctx, op, operand(0));
      const View& w = bf16_weight(ctx, op, op.operand(1));
      if (!is_contiguous(w) || w.shape.size() != 2 || w.shape[1] != x.width) throw Error("codegen: matmul weight layout (" + ctx.where(op) + ")");
      const int64_t n = w.shape[0];
      // With an epilogue add the kernel writes the add's result: residual + x W^T.
      const View& y = ctx.epilogue ? ctx.view(ctx.epilogue->out) : result();
      const View& residual = ctx.epilogue ? ctx.view(ctx.epilogue->residual) : y;
      // With a norm (norm_matmuls.h) the CUDA-core steps read its input and compute it; the
      // tensor-core steps launch it first and read its result.
      const NormInput norm = norm_input(ctx);
      // With the MoE combine in the epilogue (epilogue_adds.h) it sums the MoE's per-pair rows too.
      const ir::Op* moe = ctx.epilogue ? ctx.epilogue->routed : nullptr;
      const int64_t routed = moe ? moe_top_k(*moe) : 0;
      const MatmulFusions f{.acc = ctx.epilogue != nullptr, .routed = routed, .norm = norm.mode, .norm_x = norm.mode ? elem(*norm.x) : kF32,
                            .norm_threads = norm.threads};
      const KernelSource k = dense_matmul_instance(ctx, x.width, n, x.rows, elem(operand(0)), elem(y), f);
      // The step's instance computes the norm (NORM) or reads its result, launched first here.
      const bool fused = norm.mode && k.library.empty() && kernel_param(k, "NORM") != 0;
      if (norm.mode && !fused) launch_rms_norm(*ctx.norm->norm, ctx, dense_matmul_instances(ctx, x.width, n, elem(operand(0)), f));
      launch_dense(ctx, k, x.rows,
             matmul::Args{.x = P(fused ? *norm.x : operand(0)), .w = P(w), .y = P(y), .residual = P(residual), .n_tokens = x.rows,
                          .x_row_stride = fused ? norm.rows.stride : x.stride, .x_batch_stride = 0, .y_row_stride = n, .y_batch_stride = 0,
                          .w_batch_stride = 0, .norm_weight = P(fused ? *norm.weight : w), .norm_out = P(operand(0)),
                          .eps = fused ? norm.eps : 0.f, .routed = moe ? moe_partial_rows(ctx, *moe, x.rows) : P(w)});
      return;
    }
    case OpKind::MatmulInt4: {
      const Rows x = rows_of(ctx, op, operand(0));
      const View& packed = operand(1);
      const int64_t n = packed.shape[0];
      const KernelSource k = instance(ctx, 0, [&] { return matmul_int4_kernel(x.width, n, elem(operand(0)), elem(result()), false, arch); });
      launch(ctx, k, x.rows,
             matmul_int4::Args{.x = P(operand(0)), .w_packed = P(packed), .w_scale = P(operand(2)), .y = P(result()),
                               .n_tokens = x.rows, .x_row_stride = x.stride, .y_row_stride = n});
      return;
    }
    case OpKind::HeadMatmul: {
      const View& x = operand(0);
      const View& w = bf16_weight(ctx, op, op.operand(1));
      if (x.strides.size() != 3 || x.strides[2] != 1) throw Error("codegen: head_matmul input layout (" + ctx.where(op) + ")");
      const int64_t heads = w.shape[0], n = w.shape[1], kdim = w.shape[2];
      bool kn = false;
      if (w.strides[2] == 1 && w.strides[1] == kdim) {
        kn = false;
      } else if (w.strides[1] == 1 && w.strides[2] == n) {
        kn = true;  // the absorbed W_UK: a transposed view, read as [K, N] without a copy
      } else {
        throw Error("codegen: head_matmul weight view has strides no kernel reads (" + ctx.where(op) + ")");
      }
      // [K, N] (W_UK): the template's PREFETCH counts KiB over all heads' [K, N] together.
      const int64_t pf_kn = weight_prefetch_after_light_kib(ctx.prev_launch_weight_bytes, 2 * heads * n * kdim, 1);
      auto uk_instance = [&] { return matmul_kernel(kdim, n, elem(x), elem(result()), kn, false, arch, 0, 0, 0, 0, 0, pf_kn); };
      if (ctx.uk_append) {  // the rope-append's blocks after W_UK's (uk_rope_append.h)
        const RopeAppendLaunch ra = rope_append_launch(*ctx.uk_append, *ctx.uk_rope, ctx);
        if (!kn || ra.heads != heads || ra.rows != x.shape[0]) throw Error("codegen: W_UK and the rope-append it launches disagree (" + ctx.where(op) + ")");
        const KernelSource k = instance(ctx, 0, [&] {
          return uk_rope_append_kernel(uk_instance(), ra.kv_lora, ra.rope, ra.heads, ra.interleaved, ra.q, ra.cache, arch);
        });
        const mla_rope_append::Args& r = ra.args;
        launch(ctx, k, x.shape[0],
               uk_rope_append::Args{.x = P(x), .w = P(w), .y = P(result()), .n_tokens = x.shape[0], .x_row_stride = x.strides[0],
                                    .x_batch_stride = x.strides[1], .y_row_stride = heads * n, .y_batch_stride = n,
                                    .w_batch_stride = w.strides[0], .latent = r.latent, .norm_weight = r.norm_weight,
                                    .k_rope_src = r.k_rope_src, .cache = r.cache, .cache_len = r.cache_len, .q_src = r.q_src,
                                    .q_dst = r.q_dst, .positions = r.positions, .latent_stride = r.latent_stride,
                                    .k_rope_stride = r.k_rope_stride, .max_slots = r.max_slots, .q_src_row_stride = r.q_src_row_stride,
                                    .q_src_head_stride = r.q_src_head_stride, .q_dst_row_stride = r.q_dst_row_stride,
                                    .q_dst_head_stride = r.q_dst_head_stride, .eps = r.eps, .theta = r.theta,
                                    .yarn_factor = r.yarn_factor, .yarn_low = r.yarn_low, .yarn_high = r.yarn_high,
                                    .cos_sin_scale = r.cos_sin_scale},
               heads);
        return;
      }
      const KernelSource k = kn ? instance(ctx, 0, uk_instance)
                                : dense_matmul_instance(ctx, kdim, n, x.shape[0], elem(x), elem(result()), {.batched = true, .batches = heads});
      launch(ctx, k, x.shape[0],
             matmul::Args{.x = P(x), .w = P(w), .y = P(result()), .residual = P(result()), .n_tokens = x.shape[0], .x_row_stride = x.strides[0],
                          .x_batch_stride = x.strides[1], .y_row_stride = heads * n, .y_batch_stride = n, .w_batch_stride = w.strides[0],
                          .norm_weight = P(w), .norm_out = P(result()), .eps = 0.f, .routed = P(w)},
             heads);
      return;
    }
    case OpKind::Rope: {
      const View& x = operand(0);
      const bool per_head = x.shape.size() == 3;
      const int64_t rows = x.shape[0], heads = per_head ? x.shape[1] : 1, dim = x.shape.back();
      if (x.strides.back() != 1) throw Error("codegen: rope input layout (" + ctx.where(op) + ")");
      const RopeArgs r = rope_args_of(op, dim);
      const KernelSource k = instance(ctx, 0, [&] { return rope_kernel(dim, heads, op.attrs().get_bool("interleaved"), elem(x), elem(result()), arch); });
      launch(ctx, k, rows,
             rope::Args{.x = P(x), .y = P(result()), .positions = P(operand(1)), .n_tokens = rows, .x_row_stride = x.strides[0],
                        .x_head_stride = per_head ? x.strides[1] : dim, .y_row_stride = heads * dim, .y_head_stride = dim,
                        .theta = r.theta, .yarn_factor = r.yarn_factor, .yarn_low = r.yarn_low, .yarn_high = r.yarn_high,
                        .cos_sin_scale = r.cos_sin_scale});
      return;
    }
    case OpKind::KvAppend: {
      if (ctx.rope_append) {
        lower_rope_append(op, ctx);
        return;
      }
      const View& cache = operand(0);
      std::vector<const Value*> parts;
      for (size_t k = 1; k < op.num_operands(); ++k) {
        const Value* p = op.operand(k);
        if (p->defining_op() && p->defining_op()->kind() == OpKind::Concat) {
          for (const Value* q : p->defining_op()->operands()) parts.push_back(q);
        } else {
          parts.push_back(p);
        }
      }
      if (parts.size() > 2) throw Error("codegen: kv_append of more than two parts (" + ctx.where(op) + ")");
      const Rows a = rows_of(ctx, op, ctx.view(parts[0]));
      const Rows b = parts.size() == 2 ? rows_of(ctx, op, ctx.view(parts[1])) : Rows{a.rows, 0, a.stride};
      const View& first = ctx.view(parts[0]);
      if (ctx.view(parts.back()).dtype != first.dtype)
        throw Error("codegen: kv_append of parts stored in different dtypes (" + ctx.where(op) + ")");
      const KernelSource k = instance(ctx, 0, [&] { return kv_append_kernel(a.width, b.width, elem(first), elem(cache), arch); });
      launch(ctx, k, a.rows,
             kv_append::Args{.latent_src = P(ctx.view(parts[0])), .rope_src = P(ctx.view(parts.back())), .cache = P(cache),
                             .cache_len = step(plan::StepInputKind::CacheLength), .n_tokens = a.rows, .latent_src_stride = a.stride,
                             .rope_src_stride = b.stride, .max_slots = cache.shape[0]});
      return;
    }
    case OpKind::KvCompact: {
      // @target_commit, in place: the step's rows already sit at rows L.. of the cache
      // (kv_append put them there); keep[] and its length arrive as the commit bucket's
      // Tokens and TokenCount step inputs. Compaction moves whole rows, so the latent / rope
      // split does not matter: C = the row width, R = 0.
      const View& cache = operand(0);
      if (cache.shape.size() != 2) throw Error("codegen: kv_compact cache layout (" + ctx.where(op) + ")");
      // The kernel compacts the cache's own pending rows: any other step operand would be ignored.
      const Value* pending = op.operand(1);
      if (pending->defining_op() || !is_pending_arg(pending->name()))
        throw Error("codegen: kv_compact's step rows must be the commit's pending cache rows (%kv_step.L), not a computed "
                    "value (" + ctx.where(op) + ")");
      const int64_t width = cache.shape[1];
      const KernelSource k = instance(ctx, 0, [&] { return kv_compact_kernel(width, 0, elem(cache), arch); });
      launch(ctx, k, 1,
             kv_compact::Args{.cache = P(cache), .cache_len = step(plan::StepInputKind::CacheLength), .keep = P(operand(2)),
                              .n_keep = step(plan::StepInputKind::TokenCount), .max_keep = ctx.tokens, .max_slots = cache.shape[0]});
      return;
    }
    case OpKind::MlaAttention: {
      const View& ql = operand(0);
      const View& qr = operand(1);
      const View& kv = operand(2);
      const int64_t t = ql.shape[0], heads = ql.shape[1], c = ql.shape[2], r = qr.shape[2];
      if (ql.strides[2] != 1 || ql.strides[1] != c || qr.strides[2] != 1 || kv.offset != 0 || kv.shape[1] != c + r ||
          !kv.root || kv.root->defining_op()) {
        throw Error("codegen: mla_attention operand layout (" + ctx.where(op) + ")");
      }
      if (qr.dtype != ql.dtype) throw Error("codegen: mla_attention query parts stored in different dtypes (" + ctx.where(op) + ")");
      // Instance 0: one launch, a block per (head, token); 1 and 2: the split pair over the
      // context (kernels_templates/mla_split.cuh), for steps of up to mla_split_max_tokens. All
      // are chosen at select-kernels; each bucket picks by its token count. The pair's blocks
      // stage a tile of cache rows once for 8 heads and write per-split partials to the scratch;
      // the combine merges them. Against mla_attention (a block per head, each re-reading the
      // whole cache) it reads the cache heads / 8 times fewer, and its splits fill the SMs at 1
      // token; at many tokens (one split) it is slower. An all-heads partial (MMA 2: the cache
      // read once per split for every head) has its own step limit (mla_split_max_tokens). n_splits
      // follows the bucket's token count and max_context (mla_split_count); the scratch is sized
      // for the largest such bucket's.
      const KernelSource whole = instance(ctx, 0, [&] { return mla_attention_kernel(heads, c, r, elem(ql), elem(kv), elem(result()), arch); });
      const bool split = mla_split_max_tokens(arch) > 0;
      const KernelSource part = split ? instance(ctx, 1, [&] { return mla_split_partial_kernel(heads, c, r, elem(ql), elem(kv), arch); }) : whole;
      // With ctx.uv (attention_uv.h) the combine's launch (instance 2) also multiplies by W_UV,
      // writing the head_matmul's result; the latent (this op's result) is never stored, only the
      // dtype it would be stored in kept (the product reads it rounded to that).
      const View* uv_w = ctx.uv ? &bf16_weight(ctx, *ctx.uv, ctx.uv->operand(1)) : nullptr;
      const View* uv_y = ctx.uv ? &ctx.view(ctx.uv->result()) : nullptr;
      const KernelSource comb = !split ? whole
                                : ctx.uv ? instance(ctx, 2, [&] { return mla_split_combine_uv_kernel(heads, c, uv_w->shape[1], elem(result()), elem(*uv_y), arch); })
                                         : instance(ctx, 2, [&] { return mla_split_combine_kernel(heads, c, elem(result()), arch); });
      if (!ctx.selected) return;  // select-kernels: the instances are recorded
      if (!split || t > mla_split_max_tokens(arch, kernel_param(part, "MMA") >= 2)) {
        if (ctx.uv) throw Error("codegen: a " + std::to_string(t) + "-token step of an attention fused with W_UV takes no split pair (" + ctx.where(op) + ")");
        // Without a mask operand the host's causal TreeMask gives the same visibility.
        launch(ctx, whole, t,
               mla_attention::Args{.q_latent = P(ql), .q_rope = P(qr), .kv_cache = P(kv), .cache_len = step(plan::StepInputKind::CacheLength),
                                   .tree_mask = step(plan::StepInputKind::TreeMask), .out = P(result()), .n_tokens = t,
                                   .q_latent_row_stride = ql.strides[0], .q_rope_row_stride = qr.strides[0],
                                   .q_rope_head_stride = qr.strides[1], .out_row_stride = heads * c, .mask_words = (t + 31) / 32,
                                   .softmax_scale = op.attrs().get_float("scale")});
        return;
      }
      const int64_t splits = mla_split_count(part, ctx.max_context, t, arch);
      const LaunchArg ws = ctx.scratch(op);
      // Without a mask operand the host's causal TreeMask gives the same visibility.
      launch(ctx, part, t,
             mla_split_partial::Args{.q_latent = P(ql), .q_rope = P(qr), .kv_cache = P(kv), .cache_len = step(plan::StepInputKind::CacheLength),
                                     .tree_mask = step(plan::StepInputKind::TreeMask), .workspace = ws, .n_tokens = t, .n_splits = splits,
                                     .q_latent_row_stride = ql.strides[0], .q_rope_row_stride = qr.strides[0],
                                     .q_rope_head_stride = qr.strides[1], .mask_words = (t + 31) / 32,
                                     .softmax_scale = op.attrs().get_float("scale")},
             splits);
      if (ctx.uv) {
        launch(ctx, comb, t,
               mla_split_combine_uv::Args{.workspace = ws, .w = P(*uv_w), .y = P(*uv_y), .n_tokens = t, .n_splits = splits,
                                          .w_head_stride = uv_w->strides[0], .y_row_stride = heads * uv_w->shape[1]});
        return;
      }
      launch(ctx, comb, t,
             mla_split_combine::Args{.workspace = ws, .out = P(result()), .n_tokens = t, .n_splits = splits, .out_row_stride = heads * c});
      return;
    }
    case OpKind::Add: {
      const View& a = operand(0);
      const View& b = operand(1);
      if (!is_contiguous(a) || !is_contiguous(b)) throw Error("codegen: add of strided views (" + ctx.where(op) + ")");
      const View& out = result();
      const int64_t d = out.shape.back(), rows = product(out.shape) / std::max<int64_t>(d, 1);
      const KernelSource k = instance(ctx, 0, [&] { return add_kernel(d, elem(a), elem(b), elem(out), arch); });
      launch(ctx, k, rows, add::Args{.a = P(a), .b = P(b), .out = P(out), .n_tokens = rows});
      return;
    }
    case OpKind::Swiglu:
      launch_swiglu(op, ctx, 0);
      return;
    case OpKind::MoeRouter: {
      const View& logits = operand(0);
      const View& bias = operand(1);
      if (!is_contiguous(logits) || logits.dtype != DType::F32 || bias.dtype != DType::F32)
        throw Error("codegen: moe_router operands (" + ctx.where(op) + ")");
      const ir::Attrs& a = op.attrs();
      const KernelSource k = instance(ctx, 0, [&] {
        ModelConfig c;
        c.n_routed_experts = logits.shape[1];
        c.num_experts_per_tok = a.get_int("top_k");
        c.n_group = a.get_int("n_group");
        c.topk_group = a.get_int("topk_group");
        c.norm_topk_prob = a.get_bool("norm_topk_prob");
        return moe_router_kernel(c, arch);
      });
      launch(ctx, k, logits.shape[0],
             moe_router::Args{.logits = P(logits), .bias = P(bias), .topk_ids = P(result(1)), .topk_weights = P(result(0)),
                              .n_tokens = logits.shape[0], .routed_scaling = a.get_float("routed_scaling_factor")});
      return;
    }
    case OpKind::MoeExperts:
    case OpKind::MoeExpertsInt4: {
      const bool int4 = op.kind() == OpKind::MoeExpertsInt4;
      const Rows x = rows_of(ctx, op, operand(0));
      const View& w = operand(1);
      const View& ids = operand(2);
      const View& gate = operand(3);
      const int64_t experts = gate.shape[0], inter = gate.shape[1], top_k = ids.shape[1];
      const View& up = operand(int4 ? 5 : 4);
      const View& down = operand(int4 ? 7 : 5);
      const View& none = gate;  // bf16 experts have no scales: the argument is unused
      const View& gate_s = int4 ? operand(4) : none;
      const View& up_s = int4 ? operand(6) : none;
      const View& down_s = int4 ? operand(8) : none;
      // Grouped by expert (kernels_templates/moe_grouped.cuh): each chosen expert is read once per
      // step. Scratch: h [T * top_k, inter] f32, then the per-pair partial rows [T * top_k, hidden].
      const LaunchArg h = ctx.scratch(op);
      const LaunchArg partial = moe_partial_rows(ctx, op, x.rows);
      // Instances 0 and 1 serve the small steps, then the combine's (2; none where the shared
      // expert's down projection does the combine, ctx.combined_by); the next two (INT4, from
      // heuristics' moe_wide_min_tokens on) the many-token tuning: each bucket picks by its token count.
      // With ctx.router (router_experts.h) gate/up routes the step itself, up to the program's
      // largest step (select-kernels' ctx.tokens).
      const MoeRouteFold route{.max_tokens = ctx.router ? ctx.tokens : 0,
                               .norm = ctx.router && ctx.router->attrs().get_bool("norm_topk_prob")};
      // The INT4 weights' device layout, as weight-layout recorded it on them (the same rule).
      const int64_t layout = int4 ? moe_int4_layout(x.width, inter) : 0;
      // A bf16-activations program's INT4 experts stage their activations as bf16 too (XB 1, where
      // the arch's tuning takes the tensor cores).
      const ParamValues xb = moe_experts_tuning(int4, ctx.bf16_activations);
      KernelSource k0 = instance(ctx, 0, [&] {
        return moe_grouped_gate_up_kernel(x.width, inter, experts, top_k, int4, elem(operand(0)), arch, xb, route, layout);
      });
      KernelSource k1 = instance(ctx, 1, [&] { return moe_grouped_down_kernel(x.width, inter, experts, top_k, int4, arch, xb, layout); });
      // With an epilogue add the combine writes the add's result: residual + the routed sum.
      const View& out = ctx.epilogue ? ctx.view(ctx.epilogue->out) : result();
      const View& residual = ctx.epilogue ? ctx.view(ctx.epilogue->residual) : out;
      size_t next = 2;
      std::optional<KernelSource> k2;
      if (!ctx.combined_by)
        k2 = instance(ctx, next++, [&] { return moe_combine_kernel(x.width, top_k, elem(out), ctx.epilogue != nullptr, arch); });
      const int64_t wide_min = int4 ? moe_wide_min_tokens(arch) : 0;
      if (wide_min > 0 && ctx.tokens >= wide_min) {
        const KernelSource w0 = instance(ctx, next, [&] {
          return moe_grouped_gate_up_kernel(x.width, inter, experts, top_k, int4, elem(operand(0)), arch, moe_wide_tuning(arch, false, xb), route,
                                            layout);
        });
        const KernelSource w1 = instance(ctx, next + 1, [&] {
          return moe_grouped_down_kernel(x.width, inter, experts, top_k, int4, arch, moe_wide_tuning(arch, true, xb), layout);
        });
        if (x.rows >= wide_min) k0 = w0, k1 = w1;
      }
      // Without a router to run, its arguments repeat the ids and weights (unread); where the
      // router's logits' launch routed this step (router_experts.h), the logits argument is the ids
      // themselves: the template reads them as written.
      const ir::Op* r = ctx.router;
      const bool routed = r && ctx.router_logits && siblings_launch_together(ctx, *ctx.router_logits, *ctx.router_logits_later);
      launch(ctx, k0, x.rows,
             moe_grouped_gate_up::Args{.x = P(operand(0)), .topk_ids = P(ids), .w_gate = P(gate), .w_gate_scale = P(gate_s), .w_up = P(up),
                                       .w_up_scale = P(up_s), .h = h, .n_tokens = x.rows, .x_row_stride = x.stride,
                                       .logits = P(r && !routed ? ctx.view(r->operand(0)) : ids), .bias = P(r ? ctx.view(r->operand(1)) : w),
                                       .topk_weights = P(w),
                                       .routed_scaling = r ? r->attrs().get_float("routed_scaling_factor") : 1.f});
      launch(ctx, k1, x.rows,
             moe_grouped_down::Args{.h = h, .topk_ids = P(ids), .topk_weights = P(w), .w_down = P(down), .w_down_scale = P(down_s),
                                    .partial = partial, .n_tokens = x.rows});
      if (k2)
        launch(ctx, *k2, x.rows,
               moe_combine::Args{.partial = partial, .out = P(out), .residual = P(residual), .n_tokens = x.rows, .out_row_stride = x.width});
      return;
    }
    case OpKind::Argmax: {
      const Rows x = rows_of(ctx, op, operand(0));
      const KernelSource k = instance(ctx, 0, [&] { return argmax_kernel(x.width, elem(operand(0)), arch); });
      launch(ctx, k, x.rows, argmax::Args{.logits = P(operand(0)), .out_ids = P(result()), .n_rows = x.rows, .row_stride = x.stride});
      return;
    }
    case OpKind::TopK: {
      // topk(log_softmax(x)) reads x and returns log-probabilities (the folded log_softmax).
      const ir::Op* def = op.operand(0)->defining_op();
      const bool log_probs = def && is_folded_log_softmax(*ctx.fn, *def);
      const View& in = log_probs ? ctx.view(def->operand(0)) : operand(0);
      const Rows x = rows_of(ctx, op, in);
      const int64_t kk = op.attrs().get_int("k");
      const KernelSource k = instance(ctx, 0, [&] { return topk_kernel(x.width, kk, elem(in), log_probs, arch); });
      launch(ctx, k, x.rows,
             topk::Args{.logits = P(in), .out_ids = P(result(1)), .out_vals = P(result(0)), .n_rows = x.rows, .row_stride = x.stride});
      return;
    }
    default:
      throw Error("codegen: no GPU lowering for " + ctx.where(op));
  }
}

}  // namespace kplan::passes
