// dce: remove ops whose results nothing uses (outputs are the roots; no op has side effects).
#include <unordered_map>

#include "compiler/passes/pass.h"

namespace kplan::passes {

void dce(ir::Module& m) {
  for (ir::Function* fn : m.functions()) {
    std::unordered_map<const ir::Value*, int> uses;
    ir::Function::Rewrite dead;
    auto ops = fn->ops();
    for (const ir::Op* op : ops)
      for (const ir::Value* v : op->operands()) ++uses[v];
    // Reverse order: removing a dead op can make its operands' producers dead.
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
      ir::Op* op = *it;
      if (op->kind() == ir::OpKind::Output) continue;
      bool used = false;
      for (size_t i = 0; i < op->num_results(); ++i) used |= uses[op->result(i)] > 0;
      if (used) continue;
      for (const ir::Value* v : op->operands()) --uses[v];
      dead.erased.insert(op);
    }
    fn->apply(dead);  // one pass, however many ops died
  }
}

}  // namespace kplan::passes
