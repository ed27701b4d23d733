#include "compiler/passes/epilogue_adds.h"

#include <string>
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
  Finder(const ir::Function& fn, const std::map<const Value*, View>& views, EpilogueFusions& out) : views_(views), out_(out), order_(fn) {
    const std::vector<Op*> ops = fn.ops();
    for (const Op* op : ops)
      if (op->kind() == OpKind::MoeExperts || op->kind() == OpKind::MoeExpertsInt4) moe_chain(*op);
    for (const Op* op : ops)
      if (op->kind() == OpKind::Matmul && !out_.producers.count(op)) matmul_add(*op);
  }

 private:
  // The add that is `v`'s only reader, else null.
  const Op* only_add(const Value* v) const {
    const Op* add = order_.only_reader(v);
    if (!add || add->kind() != OpKind::Add) return nullptr;
    return add->operand(0) == add->operand(1) ? nullptr : add;
  }
  static const Value* other_operand(const Op& add, const Value* v) { return add.operand(0) == v ? add.operand(1) : add.operand(0); }

  // The epilogue reads `residual` where it writes `out`: the same contiguous rows, one dtype.
  bool same_rows(const Value* residual, const Value* out) const {
    auto r = views_.find(residual), o = views_.find(out);
    if (r == views_.end() || o == views_.end()) return false;
    return is_contiguous(r->second) && is_contiguous(o->second) && r->second.shape == o->second.shape && r->second.dtype == o->second.dtype;
  }

  void matmul_add(const Op& mm) {
    const Op* add = only_add(mm.result());
    if (!add || out_.fused_adds.count(add)) return;
    const Value* residual = other_operand(*add, mm.result());
    if (!same_rows(residual, add->result())) return;
    out_.producers[&mm] = {residual, add->result()};
    out_.fused_adds[add] = &mm;
    out_.unstored.insert(mm.result());
  }

  // routed = moe(...); s = add(routed, shared_down(...)); h' = add(h, s).
  void moe_chain(const Op& moe) {
    const Value* routed = moe.result();
    const Op* inner = only_add(routed);
    if (!inner) return;
    const Value* shared = other_operand(*inner, routed);
    const Op* down = shared->defining_op();
    if (!down || down->kind() != OpKind::Matmul || only_add(shared) != inner || order_.index.at(down) < order_.index.at(&moe)) return;
    const Op* outer = only_add(inner->result());
    if (!outer) return;
    const Value* h = other_operand(*outer, inner->result());
    const Value* out = outer->result();
    if (!same_rows(h, out) || !same_rows(out, out)) return;
    out_.fused_adds[inner] = down;
    out_.unstored.insert({routed, shared, inner->result()});
    // The combine in the down projection's epilogue: its rows are the routed sum's (f32, [T, H]).
    auto r = views_.find(routed), d = views_.find(down->result());
    if (combine_in_shared_enabled() && r != views_.end() && d != views_.end() && r->second.shape == d->second.shape) {
      out_.producers[down] = {h, out, &moe};
      out_.combined_by[&moe] = down;
      out_.fused_adds[outer] = down;
      return;
    }
    out_.producers[&moe] = {h, out};
    out_.producers[down] = {out, out};
    out_.fused_adds[outer] = &moe;
  }

  const std::map<const Value*, View>& views_;
  EpilogueFusions& out_;
  ProgramOrder order_;
};

}  // namespace

void find_epilogue_adds(const ir::Function& fn, const std::map<const Value*, View>& views, EpilogueFusions& out) {
  Finder(fn, views, out);
}

bool epilogue_adds_enabled() { return codegen::compile_switch("KPLAN_FUSE_ADDS", true); }

bool combine_in_shared_enabled() { return codegen::compile_switch("KPLAN_FUSE_COMBINE", true); }

}  // namespace kplan::passes
