#pragma once
// Executes one IR function (ir/OPS.md) op by op in fp32 with the CPU op library: the literal
// "CPU reference execution of the IR". Weights are read once, when the interpreter is made,
// from the plan's weights table by the (ckpt, name) of their weight ops (weight_table.h); float
// weights are upcast, integer ones (INT4 packs) kept as int32 and dequantised once by the ops
// that use them.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/ir.h"
#include "runtime/cpu/tensor.h"
#include "runtime/cpu/weight_table.h"

namespace kplan::cpu {

// The function `name` of a compiled module; throws kplan::Error when the module has none.
const ir::Function& function_named(const ir::Module& m, const char* name);

class Interpreter {
 public:
  // `fn` must outlive the interpreter; the weights are copied out of `weights`. Throws
  // kplan::Error naming a weight the table lacks or cannot read.
  Interpreter(const ir::Function& fn, const WeightTable& weights);
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  ~Interpreter();

  // Binds the arguments by name (every argument must be given; its shape binds the symbols),
  // runs every op, and returns the outputs by name. Each op's result shape is checked against
  // its IR type under the bound symbols.
  std::map<std::string, TensorPtr> run(const std::map<std::string, TensorPtr>& args);

  const ir::Function& function() const { return fn_; }
  // The last run()'s router margins (Routing::margins), per row the smallest over its routers;
  // empty when the function routes nothing.
  const std::vector<float>& router_margins() const { return router_margins_; }

 private:
  struct OpCache;  // per-op constants derived from weights (dequantised packs, rope tables)
  const ir::Function& fn_;
  std::unordered_map<const ir::Value*, TensorPtr> weights_;
  std::unordered_map<const ir::Op*, std::unique_ptr<OpCache>> caches_;
  std::vector<float> router_margins_;
  OpCache& cache(const ir::Op* op);
  std::vector<TensorPtr> execute(const ir::Op& op, const std::vector<const Tensor*>& in,
                                 const std::map<std::string, int64_t>& symbols);
};

}  // namespace kplan::cpu
