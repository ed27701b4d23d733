#include "compiler/passes/lowering_views.h"

#include "ir/support/error.h"

namespace kplan::passes {

using ir::OpKind;

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

std::optional<Rows> as_rows(const View& v) {
  if (v.shape.empty() || v.strides.back() != 1) return std::nullopt;
  Rows r{1, v.shape.back(), v.shape.size() >= 2 ? v.strides[v.shape.size() - 2] : v.shape.back()};
  for (size_t i = 0; i + 1 < v.shape.size(); ++i) {
    r.rows *= v.shape[i];
    if (i + 2 < v.shape.size() && v.strides[i] != v.strides[i + 1] * v.shape[i + 1]) return std::nullopt;
  }
  return r;
}

std::vector<int64_t> eval_shape(const ir::Type& t, int64_t tokens) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : t.shape) {
    int64_t v = d.constant;
    for (const std::string& s : d.symbols) v += s == "T" || s == "A" || s == "C" ? tokens : s == "W" ? (tokens + 31) / 32 : 0;
    shape.push_back(v);
  }
  return shape;
}

bool is_view_op(const ir::Op& op) {
  const OpKind k = op.kind();
  return k == OpKind::Slice || k == OpKind::Reshape || k == OpKind::Transpose;
}

size_t next_launching_op(const std::vector<ir::Op*>& ops, size_t i) {
  size_t next = i + 1;
  while (next < ops.size() && !launches_kernels(*ops[next])) ++next;
  return next;
}

bool launches_kernels(const ir::Op& op) {
  const OpKind k = op.kind();
  return !is_view_op(op) && k != OpKind::Weight && k != OpKind::WeightStack && k != OpKind::Concat && k != OpKind::Output;
}

bool is_deferred_concat(const ir::Function& fn, const ir::Op& op) {
  if (op.kind() != OpKind::Concat) return false;
  for (const ir::Op* user : fn.users(op.result()))
    if (user->kind() != OpKind::KvAppend && user->kind() != OpKind::Output) return false;
  return true;
}

bool is_folded_log_softmax(const ir::Function& fn, const ir::Op& op) {
  if (op.kind() != OpKind::LogSoftmax) return false;
  const std::vector<ir::Op*> users = fn.users(op.result());
  for (const ir::Op* user : users)
    if (user->kind() != OpKind::TopK) return false;
  return !users.empty();
}

bool owns_result_storage(const ir::Function& fn, const ir::Op& op) {
  if (op.kind() == OpKind::Concat) return !is_deferred_concat(fn, op);
  return launches_kernels(op) && op.kind() != OpKind::KvAppend && op.kind() != OpKind::KvCompact &&
         !is_folded_log_softmax(fn, op);
}

bool is_cache_arg(const std::string& n) { return n.rfind("kv.", 0) == 0 || n.rfind("dk.", 0) == 0 || n.rfind("dv.", 0) == 0; }

bool is_pending_arg(const std::string& n) {
  return n.rfind("kv_step.", 0) == 0 || n.rfind("dk_step.", 0) == 0 || n.rfind("dv_step.", 0) == 0;
}

int64_t cache_rows(const std::string& name, int64_t max_context, int64_t draft_rows) {
  return name.rfind("kv.", 0) == 0 ? max_context : max_context + draft_rows;
}

std::string op_label(const ir::Function& fn, int64_t index, const ir::Op& op) {
  return "op " + std::to_string(index) + " (" + std::string(op.name()) + ") of @" + fn.name();
}

const ir::Value* view_root(const ir::Value* v) {
  while (v->defining_op() && is_view_op(*v->defining_op())) v = v->defining_op()->operand(0);
  return v;
}

std::map<const ir::Value*, View> compute_views(const ir::Function& fn, int64_t tokens, int64_t max_context,
                                               int64_t draft_rows, const std::map<const ir::Value*, DType>* stored) {
  std::map<const ir::Value*, View> views;
  auto fresh = [&](const ir::Value* v) {
    View view;
    view.root = v;
    auto narrowed = stored ? stored->find(v) : std::map<const ir::Value*, DType>::const_iterator{};
    view.dtype = stored && narrowed != stored->end() ? narrowed->second : v->type().dtype;
    view.shape = eval_shape(v->type(), tokens);
    view.strides = contiguous_strides(view.shape);
    return view;
  };
  for (const ir::Value* a : fn.args()) {
    View v = fresh(a);
    if (is_cache_arg(a->name()) && !v.shape.empty()) {
      v.shape[0] = cache_rows(a->name(), max_context, draft_rows);
      v.strides = contiguous_strides(v.shape);
    }
    views[a] = v;
  }
  const std::vector<ir::Op*> ops = fn.ops();
  for (size_t n = 0; n < ops.size(); ++n) {
    const ir::Op& op = *ops[n];
    if (op.num_results() == 0) continue;
    const ir::Value* result = op.result(0);
    switch (op.kind()) {
      case OpKind::Slice: {
        View v = views.at(op.operand(0));
        const int64_t axis = op.attrs().get_int("axis");
        v.offset += op.attrs().get_int("start") * v.strides.at(axis);
        v.shape[axis] = op.attrs().get_int("size");
        views[result] = v;
        break;
      }
      case OpKind::Reshape: {
        View v = views.at(op.operand(0));
        if (v.root && !is_contiguous(v)) throw Error("codegen: reshape of a strided view (" + op_label(fn, n, op) + ")");
        v.shape = eval_shape(result->type(), tokens);
        v.strides = contiguous_strides(v.shape);
        views[result] = v;
        break;
      }
      case OpKind::Transpose: {
        const View& in = views.at(op.operand(0));
        View v = in;
        const std::vector<int64_t>& perm = op.attrs().get_ints("perm");
        for (size_t d = 0; d < perm.size(); ++d) {
          v.shape[d] = in.shape.at(perm[d]);
          v.strides[d] = in.strides.at(perm[d]);
        }
        views[result] = v;
        break;
      }
      case OpKind::Concat: views[result] = is_deferred_concat(fn, op) ? View{} : fresh(result); break;
      case OpKind::KvAppend:
      case OpKind::KvCompact: views[result] = views.at(op.operand(0)); break;
      default:
        for (size_t r = 0; r < op.num_results(); ++r) views[op.result(r)] = fresh(op.result(r));
    }
  }
  return views;
}

const View* find_view(const std::map<const ir::Value*, View>& views, const ir::Value* v) {
  auto it = views.find(v);
  return it == views.end() ? nullptr : &it->second;
}

bool is_whole_bf16_matrix(const View& w) {
  const bool weight = w.root && w.root->defining_op() && w.root->defining_op()->kind() == ir::OpKind::Weight;
  return weight && w.dtype == DType::BF16 && is_contiguous(w) && w.shape.size() == 2;
}

}  // namespace kplan::passes
