#include "compiler/codegen/families/rope.h"

#include <algorithm>

namespace kplan::codegen::rope {
namespace {

void check(const ParamValues& p) {
  require(p.at("ROPE_DIM") % 2 == 0, "rope", "ROPE_DIM must be even");
}

// grid (tokens, head blocks): kp::rope_heads_per_block's heads a block (about a pair a thread).
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  const int64_t heads = kernel_param(k, "HEADS");
  const int64_t per_block = rope_heads_per_block(kernel_param(k, "ROPE_DIM"), heads, kernel_param(k, "THREADS"));
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(s.rows), ceil_div(heads, per_block), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "rope",
      .header = "rope.cuh",
      .function = "kp::rope",
      .params = {dim_param("ROPE_DIM", "r"), dim_param("HEADS", "h"), dim_param("INTERLEAVED", "il"), dtype_param("X_DT", "x"), dtype_param("Y_DT", "y"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::rope

namespace kplan::codegen {

int64_t rope_heads_per_block(int64_t rope_dim, int64_t heads, int64_t threads) {
  return std::clamp<int64_t>(threads / (rope_dim / 2), 1, std::max<int64_t>(heads, 1));
}

KernelSource rope_kernel(int64_t rope_dim, int64_t heads, bool interleaved, ElemType x, ElemType y,
                         std::string_view arch) {
  return instantiate(rope::family(), {{"ROPE_DIM", rope_dim}, {"HEADS", heads}, {"INTERLEAVED", interleaved ? 1 : 0},
                                      {"X_DT", dtype_code(x)}, {"Y_DT", dtype_code(y)}}, arch);
}

}  // namespace kplan::codegen
