#include "runtime/cpu/tensor.h"

namespace kplan::cpu {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::floats(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.f.assign(static_cast<size_t>(t.numel()), 0.0f);
  return t;
}

Tensor Tensor::ints(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.is_int = true;
  t.i.assign(static_cast<size_t>(t.numel()), 0);
  return t;
}

TensorPtr int_tensor(std::vector<int64_t> shape, std::vector<int32_t> values) {
  auto t = std::make_shared<Tensor>();
  t->shape = std::move(shape);
  t->is_int = true;
  t->i = std::move(values);
  return t;
}

}  // namespace kplan::cpu
