#pragma once
// One row of the backend-ops table (op_table.cc): an op at some shapes, dtypes and mask, built
// as a minimal @target IR function that the CPU interpreter runs and the lowering accepts.
// The lowering binds only the step inputs (%tokens, %positions, %tree_mask) and KV caches
// (%kv.0), so a row's float operands are embeddings of the step's tokens in random tables, and
// its result leaves through output "logits" (a whole f32 [rows, cols] buffer).
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/ir.h"
#include "ir/support/dtype.h"
#include "runtime/step_model.h"

namespace kplan::ops_test {

enum class Mask { None, Causal, Tree };

// A checkpoint tensor of the row (what the interpreter and the lowering read by name).
struct TestWeight {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// The step the row runs: T tokens after S committed cache rows.
struct StepData {
  int64_t tokens = 1, past = 0, cache_width = 0;  // cache_width 0: no %kv.0
  Mask mask = Mask::None;
  std::vector<int32_t> ids, positions;
  std::vector<uint32_t> tree_mask;  // [T, ceil(T/32)]: the tree, or causal (what the host writes)
  std::vector<int32_t> parents;     // Mask::Tree
  Matrix cache;                     // [S, cache_width]
  std::vector<int32_t> keep;        // %keep (kv_compact rows), when the row gives one
};

class CaseBuilder {
 public:
  static constexpr int64_t kVocab = 61;  // rows of every input table (ids are drawn below it)

  CaseBuilder(const StepData& step, uint64_t seed);

  ir::Builder& b() { return b_; }
  ir::Function& fn() { return *fn_; }
  const StepData& step() const { return step_; }
  ir::Value* positions() { return fn_->arg("positions"); }
  ir::Value* tree_mask() { return fn_->arg("tree_mask"); }  // nullptr unless Mask::Tree
  ir::Value* cache() { return fn_->arg("kv.0"); }
  ir::Value* keep() { return fn_->arg("keep"); }

  // An activation f32[T, width]: the step tokens' rows of a new random bf16 table; `host`, when
  // given, receives its values.
  ir::Value* input(int64_t width, float scale = 1.f, Matrix* host = nullptr);
  // Random weights under new names; `host` receives the values (as the op reads them).
  ir::Value* weight_bf16(std::vector<int64_t> shape, float scale, std::vector<float>* host = nullptr);
  ir::Value* weight_f32(std::vector<int64_t> shape, float scale, std::vector<float>* host = nullptr);
  // INT4 [n, k] (compressed-tensors pack-quantized, group 32): {packed, scale}; `host` gets the
  // dequantised values.
  std::pair<ir::Value*, ir::Value*> weight_int4(int64_t n, int64_t k, float scale, std::vector<float>* host = nullptr);
  // `count` tensors [rows, cols] stacked by weight_stack; int4: {packed stack, scale stack}.
  ir::Value* stack_bf16(int64_t count, int64_t rows, int64_t cols, float scale, std::vector<float>* host = nullptr);
  std::pair<ir::Value*, ir::Value*> stack_int4(int64_t count, int64_t rows, int64_t cols, float scale, std::vector<float>* host = nullptr);

  // output "logits", reshaped to [first dim, rest] when of rank 3.
  void output(ir::Value* v);

  std::unique_ptr<ir::Module> module;
  std::vector<TestWeight> weights;

 private:
  std::vector<float> random(int64_t n, float scale, bool bf16);
  std::string fresh(const std::string& what) { return "w" + std::to_string(weights.size()) + "." + what; }
  StepData step_;
  ir::Function* fn_ = nullptr;
  ir::Builder b_;
  uint64_t seed_;
};

// A row. `build` makes the IR (calling output once) and, for rows the lowering cannot take yet,
// returns the expected "logits" derived from ir/OPS.md by hand (so the CPU op is checked against
// something other than itself).
struct OpCase {
  std::string name;  // "rms_norm/d333": the op, then what varies
  int64_t tokens = 1, past = 0, cache_width = 0;
  Mask mask = Mask::None;
  std::vector<int32_t> keep;  // non-empty: the function takes %keep: i32[A]
  double tol = 1e-4;     // max |got - want| / max |want|, for the emulator and the GPU
  bool lowered = true;   // false: no GPU lowering yet; `build` returns the expectation
  std::function<std::optional<std::vector<float>>(CaseBuilder&)> build;
};

// Every row (op_table.cc).
const std::vector<OpCase>& op_table();

// The step a row runs (random ids, positions, mask and cache from `seed`).
StepData make_step(const OpCase& c, uint64_t seed);

}  // namespace kplan::ops_test
