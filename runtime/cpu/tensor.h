#pragma once
// A concrete value of the CPU interpreter: a shape and its elements, row-major, in fp32 or int32.
#include <cstdint>
#include <memory>
#include <vector>

namespace kplan::cpu {

// Float dtypes hold `f`; integer dtypes (i32, u32 as bits, i64 narrowed, bool) hold `i`.
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

}  // namespace kplan::cpu
