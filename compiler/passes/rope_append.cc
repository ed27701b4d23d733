#include "compiler/passes/rope_append.h"

#include <vector>

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

class Finder {
 public:
  Finder(const ir::Function& fn, const std::map<const Value*, View>& views, RopeAppendFusions& out) : views_(views), out_(out), order_(fn) {
    for (const Op* op : fn.ops())
      if (op->kind() == OpKind::KvAppend) append(*op);
  }

 private:
  const Op* only_reader(const Value* v) const { return order_.only_reader(v); }
  // The concat's rows go nowhere but the cache: kv reads it, and a plan skips the step outputs
  // (kv_step.L, for the CPU reference) that may also name it.
  bool only_appended(const Op& concat, const Op& kv) const {
    for (const Op* r : order_.readers.at(concat.result()))
      if (r != &kv && !(r->kind() == OpKind::Output && is_pending_arg(r->attrs().get_string("name")))) return false;
    return true;
  }
  const View* view(const Value* v) const { return find_view(views_, v); }
  // A rope of [T, R] or [T, heads, R] rows whose last dim is unit-stride.
  bool rope_rows(const Op& rope) const {
    const View* x = view(rope.operand(0));
    return x && x->root && (x->shape.size() == 2 || x->shape.size() == 3) && x->strides.back() == 1;
  }

  void append(const Op& kv) {
    if (kv.num_operands() != 2) return;
    const Op* concat = kv.operand(1)->defining_op();
    if (!concat || concat->kind() != OpKind::Concat || concat->num_operands() != 2 || !only_appended(*concat, kv)) return;
    const Op* norm = concat->operand(0)->defining_op();
    const Op* k_rope = concat->operand(1)->defining_op();
    if (!norm || norm->kind() != OpKind::RmsNorm || !k_rope || k_rope->kind() != OpKind::Rope) return;
    if (only_reader(norm->result()) != concat || only_reader(k_rope->result()) != concat || !rope_rows(*k_rope)) return;
    const View* latent = view(norm->operand(0));
    const View* key = view(k_rope->operand(0));
    const View* cache = view(kv.operand(0));
    const View* weight = view(norm->operand(1));
    if (!latent || !latent->root || !as_rows(*latent) || !cache || !weight || weight->dtype != DType::BF16) return;
    const DType src = latent->dtype;
    if (key->dtype != src) return;
    // Each value is rounded once, to the cache's dtype: the same as the unfused chain when its
    // intermediates are f32 or the cache is bf16.
    const DType mid = view(norm->result()) ? view(norm->result())->dtype : src;
    if (view(k_rope->result()) && view(k_rope->result())->dtype != mid) return;
    if (mid != DType::F32 && cache->dtype != DType::BF16) return;
    RopeAppend f{norm, k_rope, query_rope(kv, *k_rope, src)};
    out_.appends[&kv] = f;
    out_.absorbed[norm] = &kv;
    out_.absorbed[k_rope] = &kv;
    if (f.q_rope) out_.absorbed[f.q_rope] = &kv;
    out_.unstored.insert({norm->result(), k_rope->result()});
  }

  // The rope of the queries of the attention that reads kv's cache, when it can ride along.
  const Op* query_rope(const Op& kv, const Op& k_rope, DType src) const {
    const Op* attn = only_reader(kv.result());
    if (!attn || attn->kind() != OpKind::MlaAttention || attn->num_operands() < 3 || attn->operand(2) != kv.result()) return nullptr;
    const Op* q = attn->operand(1)->defining_op();
    if (!q || q->kind() != OpKind::Rope || only_reader(q->result()) != attn || !rope_rows(*q)) return nullptr;
    if (q->operand(1) != k_rope.operand(1) || !(q->attrs() == k_rope.attrs()) || order_.index.at(q) > order_.index.at(&kv)) return nullptr;
    const View* x = view(q->operand(0));
    const View* y = view(q->result());
    if (!y || x->dtype != src || x->shape.back() != view(k_rope.operand(0))->shape.back() || !is_contiguous(*y)) return nullptr;
    return q;
  }

  const std::map<const Value*, View>& views_;
  RopeAppendFusions& out_;
  ProgramOrder order_;
};

}  // namespace

void find_rope_append_fusions(const ir::Function& fn, const std::map<const Value*, View>& views, RopeAppendFusions& out) {
  Finder(fn, views, out);
}

bool rope_append_fusion_enabled() { return codegen::compile_switch("KPLAN_FUSE_ROPE_APPEND", true); }

}  // namespace kplan::passes
