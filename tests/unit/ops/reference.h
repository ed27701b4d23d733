#pragma once
// The CPU reference of a row: the interpreter over the row's IR function. How weights reach the
// interpreter is this one function: today a safetensors file of the row's tensors, bound as the
// "target" checkpoint; when the interpreter binds a plan's weights table by (source, name), it
// becomes that table (source "target").
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/frontend/safetensors.h"
#include "runtime/cpu/interpreter.h"
#include "tests/unit/ops/op_case.h"

namespace kplan::ops_test {

class Reference {
 public:
  Reference(const ir::Function& fn, const std::vector<TestWeight>& weights, const std::filesystem::path& dir) {
    std::vector<TensorData> tensors;
    for (const TestWeight& w : weights) tensors.push_back({w.name, w.dtype, w.shape, w.bytes});
    write_safetensors(dir / "weights.safetensors", tensors);
    checkpoint_ = std::make_unique<SafetensorsCheckpoint>(SafetensorsCheckpoint::open(dir / "weights.safetensors"));
    interpreter_ = std::make_unique<cpu::Interpreter>(fn, cpu::CheckpointSources{{"target", checkpoint_.get()}});
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
  std::unique_ptr<SafetensorsCheckpoint> checkpoint_;
  std::unique_ptr<cpu::Interpreter> interpreter_;
};

}  // namespace kplan::ops_test
