#include "compiler/codegen/families/synthetic_weights.h"

#include "ir/support/int4_frag.h"
#include "ir/support/synthetic_values.h"

namespace kplan::codegen::synthetic_weights {
namespace {

void check(const ParamValues& p) {
  const int64_t kind = p.at("KIND"), group = p.at("GROUP"), out = p.at("OUT_DT");
  require(kind >= 0 && kind <= 2, "synthetic_weights", "KIND must be 0 (normal), 1 (INT4 packed) or 2 (INT4 scale)");
  if (kind == synthetic::kNormal) {
    require(group == 0, "synthetic_weights", "GROUP must be 0 for normal values");
  } else {
    require(group >= 8 && group % 8 == 0 && group <= synthetic::kMaxGroup, "synthetic_weights",
            "GROUP must be a multiple of 8 up to " + std::to_string(synthetic::kMaxGroup) + ", got " + std::to_string(group));
    // Packed words are int32 (no element type); scales are bf16.
    require(out == (kind == synthetic::kInt4Scale ? 1 : 0), "synthetic_weights", "OUT_DT must be bf16 for scales, f32 (unused) for packed words");
  }
  const int64_t frag = p.at("FRAG_K");
  require(frag == 0 || (kind != synthetic::kNormal && group == 32 && frag % int4_frag::kSubColumns == 0), "synthetic_weights",
          "FRAG_K (the int4_frag device order's row length) must be 0, or a multiple of 128 for INT4 groups of 32");
}

// The runtime sizes the grid itself (the kernel strides); this is the block.
LaunchDims geometry(const KernelSource& k, const LaunchShape&) { return block_of(k); }

}  // namespace

const Family& family() {
  static const Family f{
      .name = "synthetic_weights",
      .header = "synthetic_weights.cuh",
      .function = "kp::synthetic_weights",
      .params = {dim_param("KIND", "k"), dtype_param("OUT_DT", "o"), dim_param("GROUP", "g"), dim_param("FRAG_K", "fk"),
                 tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::synthetic_weights

namespace kplan::codegen {

KernelSource synthetic_weights_kernel(int kind, ElemType out, int64_t group, std::string_view arch, int64_t frag_k) {
  return instantiate(synthetic_weights::family(), {{"KIND", kind}, {"OUT_DT", dtype_code(out)}, {"GROUP", group}, {"FRAG_K", frag_k}},
                     arch);
}

}  // namespace kplan::codegen
