#pragma once
// The tensors a checkpoint must hold for a given config: name, dtype and shape. One list drives
// validation of real checkpoints (frontend), random-weight synthesis (`kplan synth`) and the IR
// builder's weight values, so the three never disagree.
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "ir/support/dtype.h"

namespace kplan {

enum class TensorRole : uint8_t {
  Plain,          // an ordinary tensor (bf16 weight, f32 bias, norm weight)
  PackedInt4,     // compressed-tensors weight_packed: int32 [out, in/8]
  PackedScale,    // compressed-tensors weight_scale: bf16 [out, in/group]
  PackedShape,    // compressed-tensors weight_shape: int32 [2] = [out, in]
};

struct TensorSpec {
  std::string name;            // full checkpoint name, prefix included
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  TensorRole role = TensorRole::Plain;
  std::string module;          // for packed parts: the Linear module they belong to
  std::vector<int64_t> module_shape;  // for packed parts: the Linear's weight [out, in]
  // An F32 tensor whose math does not care how it was stored (the router's score-correction
  // bias): a checkpoint may hold it in bf16 or f16 (transformers' save_pretrained in bf16 stores
  // every tensor so), and it is widened to f32 where it is read.
  bool widen_floats = false;
};

// Every tensor of the target checkpoint, in a stable order (embedding, layers, norm, lm_head).
std::vector<TensorSpec> target_tensor_specs(const ModelConfig& c);
// Every tensor of the DFlash drafter checkpoint.
std::vector<TensorSpec> draft_tensor_specs(const DraftConfig& d);

}  // namespace kplan
