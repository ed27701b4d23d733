#include "compiler/codegen/lower_to_launches.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "compiler/codegen/launch_geometry.h"
#include "compiler/codegen/families/all.h"
#include "compiler/codegen/rope_args.h"
#include "ir/support/error.h"

namespace kplan::codegen {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;
using plan::LaunchArg;

// Where a value's elements live: base + offset, element (i0, i1, ...) at offset + sum(i_k * strides[k]).
struct View {
  enum class Base { Slot, Weight, StepInput, Deferred } base = Base::Slot;
  uint32_t index = 0;  // slot, weight or StepInputKind
  int64_t offset = 0;  // elements
  DType dtype = DType::F32;
  std::vector<int64_t> shape, strides;
};

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

bool is_contiguous(const View& v) { return v.strides == contiguous_strides(v.shape); }

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Rows of a view whose last dim is unit-stride and whose leading dims fold into one row index.
struct Rows {
  int64_t rows = 0, width = 0, stride = 0;
};
std::optional<Rows> as_rows(const View& v) {
  if (v.shape.empty() || v.strides.back() != 1) return std::nullopt;
  Rows r{1, v.shape.back(), v.shape.size() >= 2 ? v.strides[v.shape.size() - 2] : v.shape.back()};
  for (size_t i = 0; i + 1 < v.shape.size(); ++i) {
    r.rows *= v.shape[i];
    if (i + 2 < v.shape.size() && v.strides[i] != v.strides[i + 1] * v.shape[i + 1]) return std::nullopt;
  }
  return r;
}

class Lowerer {
 public:
  Lowerer(const ir::Function& fn, const WeightBytes& weights, const LowerOptions& options)
      : fn_(fn), weight_bytes_(weights), options_(options) {
    ops_ = fn.ops();
    max_tokens_ = *std::max_element(options.buckets.begin(), options.buckets.end());
    add_step_inputs();
    compute_liveness();
  }

  plan::LoweredPlan run() {
    std::vector<int64_t> order = options_.buckets;
    std::sort(order.begin(), order.end(), std::greater<>());  // slots are sized by the largest
    for (int64_t t : order) out_.buckets.push_back(lower_bucket(t));
    std::sort(out_.buckets.begin(), out_.buckets.end(), [](const auto& a, const auto& b) { return a.tokens < b.tokens; });
    out_.limits = {max_tokens_, options_.max_tree_nodes, options_.max_context};
    return std::move(out_);
  }

 private:
  // ---- setup -------------------------------------------------------------------------------
  uint32_t add_slot(const std::string& name, plan::SlotRole role, uint64_t bytes) {
    plan::BufferSlot s;
    s.name = name;
    s.role = role;
    s.size = std::max<uint64_t>(bytes, 4);
    out_.buffers.slots.push_back(s);
    return static_cast<uint32_t>(out_.buffers.slots.size() - 1);
  }

  void add_step_inputs() {
    const uint64_t t = static_cast<uint64_t>(max_tokens_);
    // (plan::step_input_name is not used: kplan_codegen links before kplan_plan.)
    const std::tuple<plan::StepInputKind, const char*, uint64_t> inputs[] = {
        {plan::StepInputKind::Tokens, "step.tokens", 4 * t},
        {plan::StepInputKind::Positions, "step.positions", 4 * t},
        {plan::StepInputKind::TreeMask, "step.tree_mask", 4 * t * ((t + 31) / 32)},
        {plan::StepInputKind::CacheLength, "step.cache_length", 4},
        {plan::StepInputKind::TokenCount, "step.token_count", 4}};
    for (const auto& [kind, name, bytes] : inputs) {
      const uint32_t slot = add_slot(name, plan::SlotRole::Input, bytes);
      out_.step_inputs.push_back({kind, slot});
    }
  }

  // The value that owns the storage a value's view reads (itself unless it is a view op result).
  const Value* root_of(const Value* v) const {
    while (v->defining_op()) {
      const OpKind k = v->defining_op()->kind();
      if (k != OpKind::Slice && k != OpKind::Reshape && k != OpKind::Transpose) break;
      v = v->defining_op()->operand(0);
    }
    return v;
  }

  void compute_liveness() {
    for (size_t i = 0; i < ops_.size(); ++i) {
      for (const Value* v : ops_[i]->operands()) {
        last_use_[root_of(v)] = static_cast<int64_t>(i);
        // kv_append reads a concat's parts itself (the concat is never materialised).
        if (ops_[i]->kind() == OpKind::KvAppend && v->defining_op() && v->defining_op()->kind() == OpKind::Concat) {
          for (const Value* part : v->defining_op()->operands()) last_use_[root_of(part)] = static_cast<int64_t>(i);
        }
      }
      if (ops_[i]->kind() == OpKind::Output) kept_.insert(root_of(ops_[i]->operand(0)));
    }
  }

  // ---- values ------------------------------------------------------------------------------
  std::vector<int64_t> eval_shape(const ir::Type& t) const {
    std::vector<int64_t> shape;
    for (const ir::Dim& d : t.shape) {
      int64_t v = d.constant;
      for (const std::string& s : d.symbols) v += s == "T" ? tokens_ : s == "W" ? (tokens_ + 31) / 32 : 0;
      shape.push_back(v);
    }
    return shape;
  }

  // A dense row-major view of type `t` at this bucket's token count (base and slot not set).
  View contiguous_view(const ir::Type& t) const {
    View view;
    view.dtype = t.dtype;
    view.shape = eval_shape(t);
    view.strides = contiguous_strides(view.shape);
    return view;
  }

  // A fresh contiguous f32/i32 buffer for `v`, in a slot chosen at the largest bucket.
  View new_root(const Value* v) {
    View view = contiguous_view(v->type());
    view.index = slot_for(v, dtype_size(view.dtype) * product(view.shape));
    return view;
  }

  uint32_t slot_for(const void* key, uint64_t bytes) {
    auto it = slot_of_.find(key);
    if (it != slot_of_.end()) return it->second;
    const bool kept = kept_.count(static_cast<const Value*>(key)) > 0;
    uint32_t slot = UINT32_MAX;
    if (!kept) {  // best fit among free scratch slots
      for (auto f = free_.begin(); f != free_.end(); ++f) {
        if (out_.buffers.slots[*f].size >= bytes && (slot == UINT32_MAX || out_.buffers.slots[*f].size < out_.buffers.slots[slot].size)) slot = *f;
      }
      if (slot != UINT32_MAX) free_.erase(slot);
    }
    if (slot == UINT32_MAX) {
      slot = add_slot(kept ? "out." + std::to_string(out_.buffers.slots.size()) : "scratch." + std::to_string(out_.buffers.slots.size()),
                      kept ? plan::SlotRole::Output : plan::SlotRole::Scratch, bytes);
    }
    slot_of_[key] = slot;
    return slot;
  }

  void release_after(int64_t op_index) {
    if (!allocating_) return;
    for (const auto& [root, last] : last_use_) {
      if (last != op_index || kept_.count(root)) continue;
      auto it = slot_of_.find(root);
      if (it != slot_of_.end() && out_.buffers.slots[it->second].role == plan::SlotRole::Scratch) free_.insert(it->second);
    }
  }

  uint32_t weight_index(const Op* op) {
    const std::string name = op->attrs().get_string("name");
    auto it = weight_of_.find(name);
    if (it != weight_of_.end()) return it->second;
    plan::Weight w;
    w.name = name;
    w.dtype = op->result()->type().dtype;
    w.shape = eval_shape(op->result()->type());
    const uint64_t bytes = dtype_size(w.dtype) * product(w.shape);
    if (op->kind() == OpKind::Weight) {
      w.view = weight_bytes_(name);
    } else {  // weight_stack: the checkpoint's per-expert tensors, stacked
      w.layout = "stacked";
      const std::string pattern = name;
      const size_t star = pattern.find('*');
      for (int64_t e = 0; e < op->attrs().get_int("count"); ++e) {
        const std::span<const uint8_t> part = weight_bytes_(pattern.substr(0, star) + std::to_string(e) + pattern.substr(star + 1));
        w.owned.insert(w.owned.end(), part.begin(), part.end());
      }
    }
    w.size = bytes;  // the writer sets it again; validate_plan reads it before writing too
    if (w.data().size() != bytes) throw Error("codegen: weight " + name + " holds " + std::to_string(w.data().size()) + " bytes, its type needs " + std::to_string(bytes));
    out_.weights.push_back(std::move(w));
    weight_of_[name] = static_cast<uint32_t>(out_.weights.size() - 1);
    return weight_of_[name];
  }

  const View& view(const Value* v) {
    auto it = views_.find(v);
    if (it == views_.end()) throw Error("codegen: lowering reached a value with no storage (" + v->type().str() + ")");
    return it->second;
  }

  LaunchArg ptr(const View& v) {
    const uint64_t bytes = static_cast<uint64_t>(v.offset) * dtype_size(v.dtype);
    switch (v.base) {
      case View::Base::Slot: return LaunchArg::buffer(v.index, bytes);
      case View::Base::Weight: return LaunchArg::weight(v.index, bytes);
      case View::Base::StepInput:
        if (bytes != 0) throw Error("codegen: a view into a step input is not supported");
        return LaunchArg::step_input(static_cast<plan::StepInputKind>(v.index));
      case View::Base::Deferred: break;
    }
    throw Error("codegen: a deferred concat was read by a kernel");
  }

  LaunchArg step(plan::StepInputKind k) { return LaunchArg::step_input(k); }

  // One launch of `k`; `A` is its family's Args struct (a mismatch is refused here, a swapped or
  // missing argument does not compile).
  template <class A>
  void launch(const Op* op, const KernelSource& k, int64_t rows, const A& typed, int64_t batch = 1) {
    static const std::vector<KernelArg> signature = signature_of<A>();
    if (signature.size() != k.signature.size()) throw Error("codegen: launch of " + k.id + " with another family's arguments");
    for (size_t a = 0; a < signature.size(); ++a) {
      if (signature[a].name != k.signature[a].name) throw Error("codegen: launch of " + k.id + " with another family's arguments");
    }
    std::vector<LaunchArg> args = launch_args(typed);
    auto it = kernel_of_.find(k.id);
    if (it == kernel_of_.end()) {
      out_.kernels.push_back(k);
      it = kernel_of_.emplace(k.id, static_cast<uint32_t>(out_.kernels.size() - 1)).first;
    }
    plan::Launch l;
    l.kernel = it->second;
    const LaunchDims d = launch_dims(k, rows, batch);
    l.grid = d.grid;
    l.block = d.block;
    l.smem_bytes = d.smem_bytes;
    l.args = std::move(args);
    l.note = "op " + std::to_string(op_index_) + ": " + std::string(op->name()) + " -> " + k.id;
    launches_->push_back(std::move(l));
  }

  Rows rows_of(const Op* op, const View& v) {
    const std::optional<Rows> r = as_rows(v);
    if (!r || v.dtype != DType::F32) {
      throw Error("codegen: " + std::string(op->name()) + " (op " + std::to_string(op_index_) + ") reads a strided view no kernel addresses");
    }
    return *r;
  }

  const View& bf16_weight(const Op* op, const Value* v) {
    const View& w = view(v);
    if (w.base != View::Base::Weight || w.dtype != DType::BF16) {
      throw Error("codegen: " + std::string(op->name()) + " (op " + std::to_string(op_index_) + ") needs a bf16 weight, got " + v->type().str());
    }
    return w;
  }


  // ---- one bucket --------------------------------------------------------------------------
  plan::Bucket lower_bucket(int64_t tokens) {
    tokens_ = tokens;
    allocating_ = out_.buckets.empty();
    views_.clear();
    plan::Bucket bucket;
    bucket.program = fn_.name();
    bucket.tokens = static_cast<uint32_t>(tokens);
    launches_ = &bucket.launches;
    for (const Value* a : fn_.args()) bind_arg(a);
    for (size_t n = 0; n < ops_.size(); ++n) {
      op_index_ = static_cast<int64_t>(n);
      lower_op(ops_[n], bucket);
      release_after(op_index_);
    }
    return bucket;
  }

  void bind_arg(const Value* a) {
    View v = contiguous_view(a->type());
    const std::string& n = a->name();
    if (n == "tokens" || n == "positions" || n == "tree_mask") {
      v.base = View::Base::StepInput;
      v.index = static_cast<uint32_t>(n == "tokens" ? plan::StepInputKind::Tokens
                                      : n == "positions" ? plan::StepInputKind::Positions
                                                         : plan::StepInputKind::TreeMask);
    } else if (n.rfind("kv.", 0) == 0) {
      const int64_t width = v.shape.at(1);
      v.shape[0] = options_.max_context;
      v.strides = contiguous_strides(v.shape);
      const uint64_t row_bytes = static_cast<uint64_t>(width) * dtype_size(v.dtype);
      auto it = slot_by_name_.find(n);
      if (it == slot_by_name_.end()) {
        const uint32_t slot = add_slot(n, plan::SlotRole::Persistent, row_bytes * options_.max_context);
        out_.kv_caches.push_back({n, slot, row_bytes, static_cast<uint64_t>(options_.max_context)});
        it = slot_by_name_.emplace(n, slot).first;
      }
      v.index = it->second;
    } else {
      throw Error("codegen: @" + fn_.name() + " argument %" + n + " has no GPU binding");
    }
    views_[a] = v;
  }

  void lower_op(const Op* op, plan::Bucket& bucket) {
    auto operand = [&](size_t k) -> const View& { return view(op->operand(k)); };
    const Value* result = op->num_results() ? op->result(0) : nullptr;
    switch (op->kind()) {
      case OpKind::Weight:
      case OpKind::WeightStack: {
        View v = contiguous_view(result->type());
        v.base = View::Base::Weight;
        v.index = weight_index(op);
        views_[result] = v;
        return;
      }
      case OpKind::Slice: {
        View v = operand(0);
        const int64_t axis = op->attrs().get_int("axis");
        v.offset += op->attrs().get_int("start") * v.strides.at(axis);
        v.shape[axis] = op->attrs().get_int("size");
        views_[result] = v;
        return;
      }
      case OpKind::Reshape: {
        View v = operand(0);
        if (!is_contiguous(v)) throw Error("codegen: reshape of a strided view (op " + std::to_string(op_index_) + ")");
        v.shape = eval_shape(result->type());
        v.strides = contiguous_strides(v.shape);
        views_[result] = v;
        return;
      }
      case OpKind::Transpose: {
        const View& in = operand(0);
        View v = in;
        const std::vector<int64_t>& perm = op->attrs().get_ints("perm");
        for (size_t d = 0; d < perm.size(); ++d) {
          v.shape[d] = in.shape.at(perm[d]);
          v.strides[d] = in.strides.at(perm[d]);
        }
        views_[result] = v;
        return;
      }
      case OpKind::Concat: {
        // Only kv_append reads concats (its parts go to the cache row by row) and the CPU-only
        // kv_step outputs; anything else would need a copy kernel.
        for (const Op* user : fn_.users(result)) {
          if (user->kind() != OpKind::KvAppend && user->kind() != OpKind::Output) {
            throw Error("codegen: concat (op " + std::to_string(op_index_) + ") feeds " + std::string(user->name()) + ", which has no lowering");
          }
        }
        View v;
        v.base = View::Base::Deferred;
        views_[result] = v;
        return;
      }
      case OpKind::Output: {
        const std::string& name = op->attrs().get_string("name");
        if (name.rfind("kv_step.", 0) == 0) return;  // the step's rows already sit in the cache
        const View& v = operand(0);
        if (v.base != View::Base::Slot || v.offset != 0 || !is_contiguous(v) || v.dtype != DType::F32 || v.shape.size() != 2) {
          throw Error("codegen: output " + name + " is not a whole f32 [rows, cols] buffer");
        }
        plan::StepOutput o;
        o.slot = v.index;
        o.rows = v.shape[0];
        o.cols = v.shape[1];
        if (name == "logits") {
          o.kind = plan::OutputKind::Logits;
        } else if (name.rfind("hidden.", 0) == 0) {
          o.kind = plan::OutputKind::Hidden;
          o.layer = std::stoll(name.substr(7));
        } else {
          throw Error("codegen: unknown output " + name);
        }
        bucket.outputs.push_back(o);
        return;
      }
      case OpKind::Embedding: {
        const View& table = bf16_weight(op, op->operand(1));
        const View out = views_[result] = new_root(result);
        launch(op, embedding_kernel(table.shape[1], ElemType::F32), out.shape[0],
               embedding::Args{.ids = ptr(operand(0)), .table = ptr(table), .out = ptr(out), .n_tokens = out.shape[0],
                               .vocab = table.shape[0]});
        return;
      }
      case OpKind::RmsNorm: {
        const Rows x = rows_of(op, operand(0));
        const View& w = bf16_weight(op, op->operand(1));
        const View out = views_[result] = new_root(result);
        launch(op, rms_norm_kernel(x.width, ElemType::F32, ElemType::F32), x.rows,
               rms_norm::Args{.x = ptr(operand(0)), .weight = ptr(w), .y = ptr(out), .n_rows = x.rows, .x_stride = x.stride,
                              .y_stride = x.width, .eps = op->attrs().get_float("eps")});
        return;
      }
      case OpKind::Matmul:
      case OpKind::LmHead: {
        const Rows x = rows_of(op, operand(0));
        const View& w = bf16_weight(op, op->operand(1));
        if (!is_contiguous(w) || w.shape.size() != 2 || w.shape[1] != x.width) throw Error("codegen: matmul weight layout (op " + std::to_string(op_index_) + ")");
        const View out = views_[result] = new_root(result);
        const int64_t n = w.shape[0];
        launch(op, matmul_kernel(x.width, n, ElemType::F32, ElemType::F32), x.rows,
               matmul::Args{.x = ptr(operand(0)), .w = ptr(w), .y = ptr(out), .n_tokens = x.rows, .x_row_stride = x.stride,
                            .x_batch_stride = 0, .y_row_stride = n, .y_batch_stride = 0, .w_batch_stride = 0});
        return;
      }
      case OpKind::MatmulInt4: {
        const Rows x = rows_of(op, operand(0));
        const View& packed = operand(1);
        const View& scale = operand(2);
        const View out = views_[result] = new_root(result);
        const int64_t n = packed.shape[0];
        launch(op, matmul_int4_kernel(x.width, n, ElemType::F32, ElemType::F32), x.rows,
               matmul_int4::Args{.x = ptr(operand(0)), .w_packed = ptr(packed), .w_scale = ptr(scale), .y = ptr(out),
                                 .n_tokens = x.rows, .x_row_stride = x.stride, .y_row_stride = n});
        return;
      }
      case OpKind::HeadMatmul: {
        const View& x = operand(0);
        const View& w = bf16_weight(op, op->operand(1));
        if (x.strides.size() != 3 || x.strides[2] != 1) throw Error("codegen: head_matmul input layout (op " + std::to_string(op_index_) + ")");
        const int64_t heads = w.shape[0], n = w.shape[1], k = w.shape[2];
        bool kn = false;
        if (w.strides[2] == 1 && w.strides[1] == k) {
          kn = false;
        } else if (w.strides[1] == 1 && w.strides[2] == n) {
          kn = true;
        } else {
          throw Error("codegen: head_matmul weight view has strides no kernel reads (op " + std::to_string(op_index_) + ")");
        }
        const View out = views_[result] = new_root(result);
        launch(op, matmul_kernel(k, n, ElemType::F32, ElemType::F32, kn), x.shape[0],
               matmul::Args{.x = ptr(x), .w = ptr(w), .y = ptr(out), .n_tokens = x.shape[0], .x_row_stride = x.strides[0],
                            .x_batch_stride = x.strides[1], .y_row_stride = heads * n, .y_batch_stride = n,
                            .w_batch_stride = w.strides[0]},
               heads);
        return;
      }
      case OpKind::Rope: {
        const View& x = operand(0);
        const bool per_head = x.shape.size() == 3;
        const int64_t rows = x.shape[0], heads = per_head ? x.shape[1] : 1, dim = x.shape.back();
        if (x.strides.back() != 1) throw Error("codegen: rope input layout (op " + std::to_string(op_index_) + ")");
        const View out = views_[result] = new_root(result);
        const ir::Attrs& a = op->attrs();
        const std::string scaling = a.has("scaling") ? a.get_string("scaling") : "none";
        const bool yarn = scaling == "yarn";
        const RopeArgs r = rope_args(dim, a.get_float("theta"), scaling, yarn ? a.get_float("factor") : 1.0,
                                     yarn ? a.get_int("original_max_position_embeddings") : 0, yarn ? a.get_float("beta_fast") : 0,
                                     yarn ? a.get_float("beta_slow") : 0, a.get_float("attention_factor"));
        launch(op, rope_kernel(dim, heads, a.get_bool("interleaved"), ElemType::F32, ElemType::F32), rows,
               rope::Args{.x = ptr(x), .y = ptr(out), .positions = ptr(operand(1)), .n_tokens = rows, .x_row_stride = x.strides[0],
                          .x_head_stride = per_head ? x.strides[1] : dim, .y_row_stride = heads * dim, .y_head_stride = dim,
                          .theta = r.theta, .yarn_factor = r.yarn_factor, .yarn_low = r.yarn_low, .yarn_high = r.yarn_high,
                          .cos_sin_scale = r.cos_sin_scale});
        return;
      }
      case OpKind::KvAppend: {
        const View& cache = operand(0);
        std::vector<const Value*> parts;
        for (size_t k = 1; k < op->num_operands(); ++k) {
          const Value* p = op->operand(k);
          if (p->defining_op() && p->defining_op()->kind() == OpKind::Concat) {
            for (const Value* q : p->defining_op()->operands()) parts.push_back(q);
          } else {
            parts.push_back(p);
          }
        }
        if (parts.size() > 2) throw Error("codegen: kv_append of more than two parts (op " + std::to_string(op_index_) + ")");
        const Rows a = rows_of(op, view(parts[0]));
        const Rows b = parts.size() == 2 ? rows_of(op, view(parts[1])) : Rows{a.rows, 0, a.stride};
        launch(op, kv_append_kernel(a.width, b.width, ElemType::F32, ElemType::F32), a.rows,
               kv_append::Args{.latent_src = ptr(view(parts[0])), .rope_src = ptr(view(parts.back())), .cache = ptr(cache),
                               .cache_len = step(plan::StepInputKind::CacheLength), .n_tokens = a.rows, .latent_src_stride = a.stride,
                               .rope_src_stride = b.stride, .max_slots = options_.max_context});
        views_[result] = cache;
        return;
      }
      case OpKind::MlaAttention: {
        const View& ql = operand(0);
        const View& qr = operand(1);
        const View& kv = operand(2);
        const int64_t t = ql.shape[0], heads = ql.shape[1], c = ql.shape[2], r = qr.shape[2];
        if (ql.strides[2] != 1 || ql.strides[1] != c || qr.strides[2] != 1 || kv.base != View::Base::Slot || kv.offset != 0 ||
            kv.shape[1] != c + r) {
          throw Error("codegen: mla_attention operand layout (op " + std::to_string(op_index_) + ")");
        }
        const View out = views_[result] = new_root(result);
        // Without a mask operand the host's causal TreeMask gives the same visibility.
        launch(op, mla_attention_kernel(heads, c, r, ElemType::F32, ElemType::F32, ElemType::F32), t,
               mla_attention::Args{.q_latent = ptr(ql), .q_rope = ptr(qr), .kv_cache = ptr(kv),
                                   .cache_len = step(plan::StepInputKind::CacheLength), .tree_mask = step(plan::StepInputKind::TreeMask),
                                   .out = ptr(out), .n_tokens = t, .q_latent_row_stride = ql.strides[0],
                                   .q_rope_row_stride = qr.strides[0], .q_rope_head_stride = qr.strides[1],
                                   .out_row_stride = heads * c, .mask_words = (t + 31) / 32,
                                   .softmax_scale = op->attrs().get_float("scale")});
        return;
      }
      case OpKind::Add: {
        const View& a = operand(0);
        const View& b = operand(1);
        if (!is_contiguous(a) || !is_contiguous(b) || a.dtype != DType::F32 || b.dtype != DType::F32) {
          throw Error("codegen: add of strided views (op " + std::to_string(op_index_) + ")");
        }
        const View out = views_[result] = new_root(result);
        const int64_t d = out.shape.back(), rows = product(out.shape) / std::max<int64_t>(d, 1);
        launch(op, add_kernel(d, ElemType::F32, ElemType::F32, ElemType::F32), rows,
               add::Args{.a = ptr(a), .b = ptr(b), .out = ptr(out), .n_tokens = rows});
        return;
      }
      case OpKind::Swiglu: {
        const Rows g = rows_of(op, operand(0));
        const Rows u = rows_of(op, operand(1));
        const View out = views_[result] = new_root(result);
        launch(op, swiglu_kernel(g.width, ElemType::F32, ElemType::F32, ElemType::F32), g.rows,
               swiglu::Args{.gate = ptr(operand(0)), .up = ptr(operand(1)), .out = ptr(out), .n_tokens = g.rows,
                            .gate_row_stride = g.stride, .up_row_stride = u.stride, .out_row_stride = g.width});
        return;
      }
      case OpKind::MoeRouter: {
        const View& logits = operand(0);
        const View& bias = operand(1);
        if (!is_contiguous(logits) || bias.dtype != DType::F32) throw Error("codegen: moe_router operands (op " + std::to_string(op_index_) + ")");
        const View weights = views_[op->result(0)] = new_root(op->result(0));
        const View ids = views_[op->result(1)] = new_root(op->result(1));
        const ir::Attrs& a = op->attrs();
        ModelConfig c;
        c.n_routed_experts = logits.shape[1];
        c.num_experts_per_tok = a.get_int("top_k");
        c.n_group = a.get_int("n_group");
        c.topk_group = a.get_int("topk_group");
        c.norm_topk_prob = a.get_bool("norm_topk_prob");
        launch(op, moe_router_kernel(c), logits.shape[0],
               moe_router::Args{.logits = ptr(logits), .bias = ptr(bias), .topk_ids = ptr(ids), .topk_weights = ptr(weights),
                                .n_tokens = logits.shape[0], .routed_scaling = a.get_float("routed_scaling_factor")});
        return;
      }
      case OpKind::MoeExperts:
      case OpKind::MoeExpertsInt4: {
        const bool int4 = op->kind() == OpKind::MoeExpertsInt4;
        const Rows x = rows_of(op, operand(0));
        const View& w = operand(1);
        const View& ids = operand(2);
        const View& gate = operand(3);
        const int64_t experts = gate.shape[0], inter = gate.shape[1], top_k = ids.shape[1];
        const View& up = operand(int4 ? 5 : 4);
        const View& down = operand(int4 ? 7 : 5);
        const View none = gate;  // bf16 experts have no scales: the argument is unused
        const View& gate_s = int4 ? operand(4) : none;
        const View& up_s = int4 ? operand(6) : none;
        const View& down_s = int4 ? operand(8) : none;
        // Scratch h [T, top_k, inter] f32, released with the op.
        View h;
        h.shape = {x.rows, top_k, inter};
        h.strides = contiguous_strides(h.shape);
        h.index = slot_for(op, 4 * static_cast<uint64_t>(max_tokens_ * top_k * inter));
        const View out = views_[result] = new_root(result);
        launch(op, moe_gate_up_kernel(x.width, inter, top_k, int4, ElemType::F32), x.rows,
               moe_gate_up::Args{.x = ptr(operand(0)), .topk_ids = ptr(ids), .w_gate = ptr(gate), .w_gate_scale = ptr(gate_s),
                                 .w_up = ptr(up), .w_up_scale = ptr(up_s), .h = ptr(h), .n_tokens = x.rows,
                                 .x_row_stride = x.stride, .n_experts = experts});
        launch(op, moe_down_kernel(x.width, inter, top_k, int4, ElemType::F32, false), x.rows,
               moe_down::Args{.h = ptr(h), .topk_ids = ptr(ids), .topk_weights = ptr(w), .w_down = ptr(down),
                              .w_down_scale = ptr(down_s), .out = ptr(out), .n_tokens = x.rows, .out_row_stride = x.width,
                              .n_experts = experts});
        if (allocating_) free_.insert(slot_of_.at(op));
        return;
      }
      default:
        throw Error("codegen: no GPU lowering for " + std::string(op->name()) + " (op " + std::to_string(op_index_) + " of @" + fn_.name() + ")");
    }
  }

  const ir::Function& fn_;
  const WeightBytes& weight_bytes_;
  const LowerOptions& options_;
  std::vector<Op*> ops_;
  int64_t max_tokens_ = 1, tokens_ = 1, op_index_ = 0;
  bool allocating_ = true;
  plan::LoweredPlan out_;
  std::vector<plan::Launch>* launches_ = nullptr;
  std::map<const Value*, View> views_;
  std::map<const void*, uint32_t> slot_of_;  // roots (and moe scratch, keyed by op) -> slot
  std::map<std::string, uint32_t> slot_by_name_, weight_of_, kernel_of_;
  std::map<const Value*, int64_t> last_use_;
  std::set<const Value*> kept_;
  std::set<uint32_t> free_;
};

}  // namespace

plan::LoweredPlan lower_target(const ir::Function& target, const WeightBytes& weights, const LowerOptions& options) {
  if (options.buckets.empty()) throw Error("codegen: no token-count buckets to lower for");
  if (options.max_context <= 0) throw Error("codegen: max_context must be positive");
  for (int64_t b : options.buckets) {
    if (b < 1 || b > options.max_context) throw Error("codegen: bucket of " + std::to_string(b) + " tokens is out of range");
  }
  return Lowerer(target, weights, options).run();
}

plan::LoweredPlan lower_target(const ir::Function& target, const SafetensorsCheckpoint& checkpoint,
                               const LowerOptions& options) {
  return lower_target(target, [&](const std::string& name) { return checkpoint.get(name).bytes; }, options);
}

}  // namespace kplan::codegen
