// The list of kernel families: the one place a new family is named (see family.h).
#include "compiler/codegen/families/all.h"
#include "ir/support/error.h"

namespace kplan::codegen {

const std::vector<const Family*>& all_families() {
  static const std::vector<const Family*> families = {
      &embedding::family(),
      &embedding_norm::family(),
      &rms_norm::family(),
      &matmul::family(),
      &matmul_int4::family(),
      &matmul_siblings::family(),
      &rope::family(),
      &mla_attention::family(),
      &mla_split_partial::family(),
      &mla_split_combine::family(),
      &mla_split_combine_uv::family(),
      &gqa_attention::family(),
      &kv_append::family(),
      &mla_rope_append::family(),
      &uk_rope_append::family(),
      &kv_compact::family(),
      &moe_router::family(),
      &moe_grouped_gate_up::family(),
      &moe_grouped_down::family(),
      &moe_combine::family(),
      &swiglu::family(),
      &add::family(),
      &add_norm::family(),
      &copy_rows::family(),
      &argmax::family(),
      &topk::family(),
      &round_draft_inputs::family(),
      &round_tree::family(),
      &round_sample::family(),
      &round_walk::family(),
      &synthetic_weights::family(),
      &cublaslt_matmul::family(),
  };
  return families;
}

const Family& find_family(std::string_view name) {
  for (const Family* f : all_families()) {
    if (f->name == name) return *f;
  }
  throw Error("codegen: unknown kernel family '" + std::string(name) + "'");
}

}  // namespace kplan::codegen
