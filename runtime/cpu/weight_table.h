#pragma once
// The plan's weights as the CPU interpreter reads them: looked up by (source, name) — the IR
// weight op's `ckpt` and `name` — and checked against the op's IR type. Float dtypes are upcast
// to fp32, integer ones (INT4 packs) kept as int32 and dequantised later by the ops that use
// them. A weight_stack op reads the plan's stacked weight of its '*' name when the plan has one,
// else stacks the per-expert weights. Layouts other than the dense ones the IR types describe
// are refused by name (a repacked layout needs its own reader here first). Each weight is read
// once: later loads of it (another function, another session on the same model) share the
// tensor, so every CPU session of a model uses one fp32 copy of the weights. A synthetic weight
// (`kplan compile --synthetic-weights`) is generated here (synthetic_weights.h), the values
// the GPU runtime generates on the device.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/ir.h"
#include "runtime/cpu/tensor.h"
#include "schemas/plan_model.h"

namespace kplan::cpu {

class WeightTable {
 public:
  // `weights` must outlive the table (a Plan's, kept alive with it). `plan_source` names the
  // plan in errors.
  WeightTable(const std::vector<plan::Weight>& weights, std::string plan_source);

  // The value of a weight or weight_stack op. Throws kplan::Error naming the weight when the
  // plan lacks it, records a layout this reader does not know, or disagrees with the IR type.
  // Thread-safe (sessions of one model may be created on several threads).
  TensorPtr load(const ir::Op& op) const;

  // The fp32 / int32 copies made so far: tensors, and their bytes in host memory.
  int64_t tensors_read() const;
  uint64_t bytes_read() const;

 private:
  const plan::Weight* find(const std::string& source, const std::string& name) const;
  TensorPtr read(const plan::Weight& w, const ir::Type& want, const std::string& by) const;
  TensorPtr load_uncached(const ir::Op& op) const;
  std::map<std::pair<std::string, std::string>, const plan::Weight*> by_key_;
  std::string plan_source_;
  mutable std::mutex mutex_;
  // (op kind, source, name) -> the tensor read for it (a weight op and a weight_stack op of one
  // name are different values).
  mutable std::map<std::tuple<int, std::string, std::string>, TensorPtr> loaded_;
  mutable uint64_t bytes_read_ = 0;
};

// Layouts whose bytes are the IR type's row-major elements: "row_major", "stacked" (experts
// stacked on a leading dim), "ct_pack_quantized_int4" (compressed-tensors' int32 words, which
// is what matmul_int4 / moe_experts_int4 take) and "int4_frag" / "int4_frag_scales" (stacked
// INT4 experts and their scales, in the plan as the checkpoint's rows; only the GPU's device
// copy is in ir/support/int4_frag.h's order).
bool cpu_readable_layout(const std::string& layout);

}  // namespace kplan::cpu
