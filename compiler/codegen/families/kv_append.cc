#include "compiler/codegen/families/kv_append.h"

namespace kplan::codegen::kv_append {

const Family& family() {
  static const Family f{
      .name = "kv_append",
      .header = "kv_cache.cuh",
      .function = "kp::kv_append",
      .params = {dim_param("C", "c"), dim_param("R", "r"), dtype_param("SRC_DT", "s"), dtype_param("KV_DT", "kv"), tuning_param("THREADS", "b")},
      .signature = signature_of<Args>(),
      .block = BlockParam::Threads,
      .check = nullptr,
      .geometry = one_block_per_row,
  };
  return f;
}

}  // namespace kplan::codegen::kv_append

namespace kplan::codegen {

KernelSource kv_append_kernel(int64_t kv_lora, int64_t rope, ElemType src, ElemType kv, std::string_view arch) {
  return instantiate(kv_append::family(), {{"C", kv_lora}, {"R", rope}, {"SRC_DT", dtype_code(src)}, {"KV_DT", dtype_code(kv)}}, arch);
}

}  // namespace kplan::codegen
