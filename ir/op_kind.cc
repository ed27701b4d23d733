#include "ir/op_kind.h"

#include <array>

namespace kplan::ir {

namespace {
// Indexed by OpKind; keep in the enum's order.
constexpr std::array<std::string_view, kNumOpKinds> kNames = {
    "weight",  "weight_stack", "output",      "slice",       "reshape",
    "transpose", "concat",     "add",         "swiglu",      "rms_norm",
    "matmul",  "matmul_int4",  "head_matmul", "lm_head",     "embedding",
    "rope",    "mla_attention_expanded",      "mla_attention", "kv_append",
    "kv_compact", "gqa_attention", "moe_router", "moe_experts", "moe_experts_int4",
    "argmax",  "topk",         "log_softmax",
};
}  // namespace

std::string_view op_kind_name(OpKind k) { return kNames[static_cast<int>(k)]; }

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (kNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

}  // namespace kplan::ir
