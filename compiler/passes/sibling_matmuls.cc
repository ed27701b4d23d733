#include "compiler/passes/sibling_matmuls.h"

#include <string>
#include <utility>

#include "compiler/codegen/heuristics/heuristics.h"

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
  const bool weight = wv.root && wv.root->defining_op() && wv.root->defining_op()->kind() == OpKind::Weight;
  return weight && wv.dtype == DType::BF16 && is_contiguous(wv) && wv.shape.size() == 2 && is_contiguous(y->second) &&
         y->second.shape.size() == 2 && y->second.shape[1] == wv.shape[0];
}

}  // namespace

void find_sibling_matmuls(const ir::Function& fn, const std::map<const Value*, View>& views, const EpilogueFusions& epilogue,
                          SiblingMatmuls& out) {
  // (activations, stored result dtype) -> the group's first sibling, while it has room.
  std::map<std::pair<const Value*, DType>, const Op*> open;
  for (const Op* op : fn.ops()) {
    if (!candidate(*op, views, epilogue)) continue;
    const std::pair<const Value*, DType> key{op->operand(0), views.at(op->result()).dtype};
    auto it = open.find(key);
    if (it == open.end()) {
      open[key] = op;
      continue;
    }
    const Op* head = it->second;
    std::vector<const Op*>& later = out.later[head];
    later.push_back(op);
    out.first[op] = head;
    if (later.size() == 2) open.erase(it);  // three siblings at most
  }
}

bool sibling_matmuls_enabled() { return codegen::compile_switch("KPLAN_FUSE_SIBLINGS", true); }

}  // namespace kplan::passes
