#pragma once
// Checkpoint tensors as fp32 Matrices for the CPU reference, through the frontend's
// weights_fp32 (bf16/f16/f32 upcast; pack-quantized INT4 dequantised as compressed-tensors does),
// with the checkpoint's tensor-name prefix applied.
#include <filesystem>
#include <string>
#include <vector>

#include "compiler/frontend/safetensors.h"
#include "runtime/step_model.h"

namespace kplan::cpu {

class WeightLoader {
 public:
  // `prefix` is prepended to every name (e.g. "language_model." for K2.5/K2.6 wrappers).
  WeightLoader(const std::filesystem::path& checkpoint, std::string prefix);

  // A 2-D weight "<module>.weight" [out, in]; when the checkpoint holds the module packed
  // ("<module>.weight_packed" / "weight_scale" / "weight_shape") it is dequantised.
  Matrix linear(const std::string& module) const;
  // Any tensor flattened to fp32 (norm weights, biases).
  std::vector<float> vector(const std::string& name) const;
  bool contains(const std::string& name) const;

 private:
  SafetensorsCheckpoint checkpoint_;
  std::string prefix_;
};

}  // namespace kplan::cpu
