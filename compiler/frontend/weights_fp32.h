#pragma once
// Checkpoint tensors materialised as fp32 for the CPU reference backend (and for tests):
// bf16 / f16 / f32 / f8_e4m3 are upcast exactly; a compressed-tensors pack-quantized INT4
// Linear is dequantised exactly as compressed-tensors does:
//   w[r, c] = (nibble(r, c) - 8) * scale[r, c / group_size]
// with 8 nibbles per int32 along the input dim, the first column in the low nibble.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/safetensors.h"

namespace kplan {

struct Fp32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major
  int64_t numel() const;
};

// One floating-point tensor as fp32. Integer dtypes are refused (kplan::Error naming it).
Fp32Tensor tensor_fp32(const TensorView& t);
Fp32Tensor tensor_fp32(const SafetensorsCheckpoint& ckpt, const std::string& name);

// True when `module` (full checkpoint name, prefix included, without ".weight") is stored as
// pack-quantized INT4 (module.weight_packed present).
bool linear_is_int4(const SafetensorsCheckpoint& ckpt, const std::string& module);

// A Linear module's weight [out, in] as fp32, whether stored as module.weight (any float dtype)
// or pack-quantized INT4 (module.weight_packed / weight_scale / weight_shape). `module` is the
// full checkpoint name, e.g. "model.layers.1.mlp.experts.3.gate_proj" (TensorSpec::module).
Fp32Tensor linear_weight_fp32(const SafetensorsCheckpoint& ckpt, const std::string& module);

// Dequantises pack-quantized parts (views of weight_packed int32 [out, ceil(in/8)],
// weight_scale [out, ceil(in/group)] in bf16/f16/f32, weight_shape [2]) to fp32 [out, in].
// The group size is in / scale columns rounded up; inconsistent parts are refused by name.
Fp32Tensor dequantize_pack_quantized(const TensorView& packed, const TensorView& scale,
                                     const TensorView& shape);

}  // namespace kplan
