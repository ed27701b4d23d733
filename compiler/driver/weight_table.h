#pragma once
// The builder's view of a checkpoint's tensor specs: name -> dtype and shape, and helpers that
// emit weight ops and Linear layers (bf16 matmul, or matmul_int4 when the spec list holds the
// compressed-tensors parts), so the IR always agrees with what the frontend validates.
#include <string>
#include <unordered_map>
#include <vector>

#include "compiler/frontend/tensor_spec.h"
#include "ir/builder.h"

namespace kplan {

class WeightTable {
 public:
  // `ckpt`: "target" or "draft" (the weight ops' ckpt attribute); `group_size` for INT4 parts.
  WeightTable(const std::vector<TensorSpec>& specs, std::string ckpt, int64_t group_size);

  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  // Throws kplan::Error naming the tensor when absent.
  const TensorSpec& spec(const std::string& name) const;
  ir::Type type(const std::string& name) const;

  ir::Value* weight(ir::Builder& b, const std::string& name) const;
  // x @ W^T for the nn.Linear `module` (without ".weight").
  ir::Value* linear(ir::Builder& b, ir::Value* x, const std::string& module) const;
  bool is_int4(const std::string& module) const { return has(module + ".weight_packed"); }
  // Stack of `count` tensors named by `pattern` with one '*' (expert index).
  ir::Value* stack(ir::Builder& b, const std::string& pattern, int64_t count) const;
  int64_t group_size() const { return group_size_; }

 private:
  std::unordered_map<std::string, const TensorSpec*> by_name_;
  std::string ckpt_;
  int64_t group_size_;
};

}  // namespace kplan
