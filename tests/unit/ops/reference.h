#pragma once
// The CPU reference of a row: the interpreter over the row's IR function, its weights bound from
// a plan weights table by (source "target", name), as the CPU reference binds a plan's.
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cpu/interpreter.h"
#include "runtime/cpu/weight_table.h"
#include "schemas/plan_model.h"
#include "tests/unit/ops/op_case.h"

namespace kplan::ops_test {

class Reference {
 public:
  Reference(const ir::Function& fn, const std::vector<TestWeight>& weights, const std::filesystem::path& dir) {
    for (const TestWeight& t : weights) {
      plan::Weight w;
      w.name = t.name;
      w.dtype = t.dtype;
      w.shape = t.shape;
      w.owned = t.bytes;
      weights_.push_back(std::move(w));
    }
    interpreter_ = std::make_unique<cpu::Interpreter>(fn, cpu::WeightTable(weights_, "row " + dir.filename().string()));
  }

  // "logits" of the row's function for the step.
  std::vector<float> run(const StepData& s) {
    std::map<std::string, cpu::TensorPtr> args;
    args["tokens"] = cpu::int_tensor({s.tokens}, s.ids);
    args["positions"] = cpu::int_tensor({s.tokens}, s.positions);
    if (s.mask == Mask::Tree)
      args["tree_mask"] = cpu::int_tensor({s.tokens, (s.tokens + 31) / 32}, {s.tree_mask.begin(), s.tree_mask.end()});
    if (s.cache_width > 0) {
      auto cache = std::make_shared<cpu::Tensor>(cpu::Tensor::floats({s.past, s.cache_width}));
      cache->f = s.cache.data;
      args["kv.0"] = cache;
    }
    if (!s.keep.empty()) args["keep"] = cpu::int_tensor({static_cast<int64_t>(s.keep.size())}, s.keep);
    const cpu::TensorPtr out = interpreter_->run(args).at("logits");
    if (out->is_int) return {out->i.begin(), out->i.end()};
    return out->f;
  }

 private:
  std::vector<plan::Weight> weights_;
  std::unique_ptr<cpu::Interpreter> interpreter_;
};

}  // namespace kplan::ops_test
