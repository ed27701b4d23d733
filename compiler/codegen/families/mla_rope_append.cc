#include "compiler/codegen/families/mla_rope_append.h"

#include "compiler/codegen/families/rope.h"

namespace kplan::codegen::mla_rope_append {
namespace {

void check(const ParamValues& p) {
  require(p.at("R") % 2 == 0, "mla_rope_append", "R must be even");
  require(p.at("THREADS") >= p.at("R") / 2, "mla_rope_append", "THREADS must cover the key's R / 2 rope pairs");
}

// grid (tokens, 1 + the queries' head blocks): block 0 of a token writes its cache row, the
// others rotate kp::rope_heads_per_block heads each (as the rope family's grid).
LaunchDims geometry(const KernelSource& k, const LaunchShape& s) {
  const int64_t heads = kernel_param(k, "HEADS");
  const int64_t per_block = rope_heads_per_block(kernel_param(k, "R"), heads, kernel_param(k, "THREADS"));
  LaunchDims d = block_of(k);
  d.grid = {static_cast<uint32_t>(s.rows), static_cast<uint32_t>(1 + ceil_div(heads, per_block)), 1};
  return d;
}

}  // namespace

const Family& family() {
  static const Family f{
      .name = "mla_rope_append",
      .header = "mla_rope_append.cuh",
      .function = "kp::mla_rope_append",
      .params = {dim_param("C", "c"), dim_param("R", "r"), dim_param("HEADS", "h"), dim_param("INTERLEAVED", "il"), dtype_param("X_DT", "x"),
                 dtype_param("Q_DT", "q"), dtype_param("KV_DT", "kv"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = check,
      .geometry = geometry,
  };
  return f;
}

}  // namespace kplan::codegen::mla_rope_append

namespace kplan::codegen {

KernelSource mla_rope_append_kernel(int64_t kv_lora, int64_t rope, int64_t heads, bool interleaved, ElemType x, ElemType q, ElemType kv,
                                    std::string_view arch) {
  return instantiate(mla_rope_append::family(), {{"C", kv_lora}, {"R", rope}, {"HEADS", heads}, {"INTERLEAVED", interleaved ? 1 : 0},
                                                 {"X_DT", dtype_code(x)}, {"Q_DT", dtype_code(q)}, {"KV_DT", dtype_code(kv)}},
                     arch);
}

}  // namespace kplan::codegen
