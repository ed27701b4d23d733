#pragma once
// Executes one IR function (ir/OPS.md) op by op in fp32 with the CPU op library: the literal
// "CPU reference execution of the IR". Weights are read once, when the interpreter is made,
// from the checkpoints their `ckpt` attribute names ("target", "draft"); float weights are
// upcast, integer ones (INT4 packs) kept as int32 and dequantised once by the ops that use them.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/frontend/safetensors.h"
#include "ir/ir.h"

namespace kplan::cpu {

// A concrete value: a shape and its elements, row-major. Float dtypes hold `f`; integer dtypes
// (i32, u32 as bits, i64 narrowed, bool) hold `i`.
struct Tensor {
  std::vector<int64_t> shape;
  bool is_int = false;
  std::vector<float> f;
  std::vector<int32_t> i;
  int64_t numel() const;
  static Tensor floats(std::vector<int64_t> shape);
  static Tensor ints(std::vector<int64_t> shape);
};
using TensorPtr = std::shared_ptr<const Tensor>;

// An integer tensor of `shape` holding `values` (token ids, positions, masks as arguments).
TensorPtr int_tensor(std::vector<int64_t> shape, std::vector<int32_t> values);

// The function `name` of a compiled module; throws kplan::Error when the module has none.
const ir::Function& function_named(const ir::Module& m, const char* name);

// The checkpoints weights come from, by the `ckpt` attribute of weight ops.
using CheckpointSources = std::map<std::string, const SafetensorsCheckpoint*>;

class Interpreter {
 public:
  // `fn` must outlive the interpreter. Throws kplan::Error when a weight is missing.
  Interpreter(const ir::Function& fn, const CheckpointSources& sources);
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  ~Interpreter();

  // Binds the arguments by name (every argument must be given; its shape binds the symbols),
  // runs every op, and returns the outputs by name. Each op's result shape is checked against
  // its IR type under the bound symbols.
  std::map<std::string, TensorPtr> run(const std::map<std::string, TensorPtr>& args);

  const ir::Function& function() const { return fn_; }

 private:
  struct OpCache;  // per-op constants derived from weights (dequantised packs, rope tables)
  const ir::Function& fn_;
  std::unordered_map<const ir::Value*, TensorPtr> weights_;
  std::unordered_map<const ir::Op*, std::unique_ptr<OpCache>> caches_;
  OpCache& cache(const ir::Op* op);
  std::vector<TensorPtr> execute(const ir::Op& op, const std::vector<const Tensor*>& in,
                                 const std::map<std::string, int64_t>& symbols);
};

}  // namespace kplan::cpu
