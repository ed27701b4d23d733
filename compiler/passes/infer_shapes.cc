// infer-shapes: recompute every result type from operands and attributes; refuse mismatches.
#include <string>

#include "compiler/passes/pass.h"
#include "ir/support/error.h"
#include "ir/infer.h"
#include "ir/printer.h"

namespace kplan::passes {

void infer_shapes(ir::Module& m) {
  for (ir::Function* fn : m.functions()) {
    for (ir::Op* op : fn->ops()) {
      std::vector<ir::Type> operands, declared;
      for (const ir::Value* v : op->operands()) operands.push_back(v->type());
      for (size_t i = 0; i < op->num_results(); ++i) declared.push_back(op->result(i)->type());
      std::vector<ir::Type> inferred;
      try {
        inferred = ir::infer_result_types(op->kind(), operands, op->attrs(), declared);
      } catch (const Error& e) {
        throw Error("infer-shapes: @" + fn->name() + ": " + ir::print_op(*fn, *op) + ": " +
                    e.what());
      }
      if (inferred.size() != declared.size())
        throw Error("infer-shapes: @" + fn->name() + ": " + ir::print_op(*fn, *op) + ": has " +
                    std::to_string(declared.size()) + " results, expected " +
                    std::to_string(inferred.size()));
      for (size_t i = 0; i < inferred.size(); ++i)
        if (!(inferred[i] == declared[i]))
          throw Error("infer-shapes: @" + fn->name() + ": " + ir::print_op(*fn, *op) +
                      ": result " + std::to_string(i) + " is declared " + declared[i].str() +
                      " but its operands give " + inferred[i].str());
    }
  }
}

}  // namespace kplan::passes
