#include "runtime/cpu/weight_loader.h"

#include "compiler/frontend/weights_fp32.h"
#include "ir/error.h"

namespace kplan::cpu {

WeightLoader::WeightLoader(const std::filesystem::path& checkpoint, std::string prefix)
    : checkpoint_(SafetensorsCheckpoint::open(checkpoint)), prefix_(std::move(prefix)) {}

bool WeightLoader::contains(const std::string& name) const {
  return checkpoint_.contains(prefix_ + name);
}

std::vector<float> WeightLoader::vector(const std::string& name) const {
  return tensor_fp32(checkpoint_, prefix_ + name).data;
}

Matrix WeightLoader::linear(const std::string& module) const {
  // bf16/f16/f32 upcast, or pack-quantized INT4 dequantised as compressed-tensors does.
  Fp32Tensor t = linear_weight_fp32(checkpoint_, prefix_ + module);
  if (t.shape.size() != 2)
    throw Error("weight '" + prefix_ + module + "' is not 2-D");
  Matrix m;
  m.rows = t.shape[0];
  m.cols = t.shape[1];
  m.data = std::move(t.data);
  return m;
}

}  // namespace kplan::cpu
