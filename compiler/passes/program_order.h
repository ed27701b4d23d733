#pragma once
// A function's ops in program order and each value's readers, as the fusion finders
// (epilogue_adds.cc, rope_append.cc) ask: "does this op come before that one?", "is this op the
// value's only reader?".
#include <map>
#include <vector>

#include "ir/ir.h"

namespace kplan::passes {

struct ProgramOrder {
  std::map<const ir::Op*, size_t> index;                          // position in fn.ops()
  std::map<const ir::Value*, std::vector<const ir::Op*>> readers;  // ops reading the value, in order

  explicit ProgramOrder(const ir::Function& fn) {
    const std::vector<ir::Op*> ops = fn.ops();
    for (size_t i = 0; i < ops.size(); ++i) {
      index[ops[i]] = i;
      for (const ir::Value* v : ops[i]->operands()) readers[v].push_back(ops[i]);
    }
  }

  // `v`'s only reader, else null.
  const ir::Op* only_reader(const ir::Value* v) const {
    auto it = readers.find(v);
    return it != readers.end() && it->second.size() == 1 ? it->second[0] : nullptr;
  }
};

}  // namespace kplan::passes
