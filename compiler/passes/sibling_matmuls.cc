#include "compiler/passes/sibling_matmuls.h"

#include <string>
#include <utility>

#include "compiler/codegen/heuristics/heuristics.h"
#include "compiler/passes/program_order.h"

namespace kplan::passes {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

// A matmul whose kernel the sibling launch can be: a whole [N, K] bf16 weight, activations as
// rows, its result whole contiguous rows, no epilogue of its own.
bool candidate(const Op& op, const std::map<const Value*, View>& views, const EpilogueFusions& epilogue) {
  if (op.kind() != OpKind::Matmul || epilogue.producers.count(&op)) return false;
  auto x = views.find(op.operand(0)), w = views.find(op.operand(1)), y = views.find(op.result());
  if (x == views.end() || w == views.end() || y == views.end() || !as_rows(x->second)) return false;
  const View& wv = w->second;
  return is_whole_bf16_matrix(wv) && is_contiguous(y->second) && y->second.shape.size() == 2 && y->second.shape[1] == wv.shape[0];
}

// The swiglu reading a group's last two siblings as its gate and up, when nothing else reads
// them and its result is whole rows of the siblings' dtype (one Y_DT for the launch).
const Op* swiglu_of(const std::vector<const Op*>& members, const std::map<const Value*, View>& views, const ProgramOrder& order) {
  const Op* gate = members[members.size() - 2];
  const Op* up = members.back();
  const Op* glu = order.only_reader(gate->result());
  if (!glu || glu->kind() != OpKind::Swiglu || order.only_reader(up->result()) != glu || glu->operand(0) != gate->result() ||
      glu->operand(1) != up->result())
    return nullptr;
  auto y = views.find(glu->result());
  const View& g = views.at(gate->result());
  if (y == views.end() || !is_contiguous(y->second) || y->second.dtype != g.dtype || views.at(up->result()).shape != g.shape) return nullptr;
  // A pair within one warp's rows (matmul_siblings.cuh): the plain sibling before it has an even row count.
  if (members.size() == 3 && views.at(members[0]->result()).shape.back() % 2 != 0) return nullptr;
  return glu;
}

}  // namespace

void find_sibling_matmuls(const ir::Function& fn, const std::map<const Value*, View>& views, const EpilogueFusions& epilogue,
                          SiblingMatmuls& out) {
  // (activations, stored result dtype) -> the group's first sibling, while it has room. One
  // launch stores its later siblings in one dtype; an f32 first sibling may lead bf16 ones (a
  // MoE layer's router, whose logits stay f32, before its shared expert's gate and up: the
  // template's YA_F32), so a bf16 sibling with no group of its own dtype joins such a group: the
  // K2.6 slice's 1-token step 1.1475 against 1.1572 ms on the H200 (bench/RESULTS.md session 45).
  std::map<std::pair<const Value*, DType>, const Op*> open;
  std::vector<const Op*> heads;  // this function's groups (`out` holds earlier functions' too)
  auto dtype = [&](const Op* op) { return views.at(op->result()).dtype; };
  auto takes = [&](const Op* head, DType d) {
    auto l = out.later.find(head);
    return l == out.later.end() || l->second.empty() || dtype(l->second.front()) == d;
  };
  for (const Op* op : fn.ops()) {
    if (!candidate(*op, views, epilogue)) continue;
    const std::pair<const Value*, DType> key{op->operand(0), dtype(op)};
    auto it = open.find(key);
    if (it != open.end() && !takes(it->second, key.second)) it = open.end();
    if (it == open.end() && key.second == DType::BF16 && f32_first_siblings_enabled()) {
      it = open.find({op->operand(0), DType::F32});
      if (it != open.end() && !takes(it->second, DType::BF16)) it = open.end();
    }
    if (it == open.end()) {
      open.try_emplace(key, op);
      continue;
    }
    const Op* head = it->second;
    std::vector<const Op*>& later = out.later[head];
    if (later.empty()) heads.push_back(head);
    later.push_back(op);
    out.first[op] = head;
    if (later.size() == 2) open.erase(it);  // three siblings at most
  }
  if (!glu_siblings_enabled()) return;
  const ProgramOrder order(fn);
  for (const Op* head : heads) {
    std::vector<const Op*> members = {head};
    members.insert(members.end(), out.later.at(head).begin(), out.later.at(head).end());
    if (const Op* glu = swiglu_of(members, views, order)) {
      out.glu[head] = glu;
      out.glu_of[glu] = head;
    }
  }
}

bool sibling_matmuls_enabled() { return codegen::compile_switch("KPLAN_FUSE_SIBLINGS", true); }

bool f32_first_siblings_enabled() { return codegen::compile_switch("KPLAN_FUSE_F32_FIRST", true); }

bool glu_siblings_enabled() { return codegen::compile_switch("KPLAN_FUSE_GLU", true); }

}  // namespace kplan::passes
