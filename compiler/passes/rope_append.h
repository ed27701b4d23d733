#pragma once
// select-kernels' rope-append fusion: an MLA layer's
//   kv_append(cache, concat(rms_norm(latent, w), rope(k_pe, positions)))
// and the rope of the queries its attention reads beside that cache,
//   mla_attention(q_latent, rope(q_pe, positions), <that kv_append>, ...),
// computed by one launch (kernels_templates/mla_rope_append.cuh) from the kv_append's rule:
// the norm and the key's rope launch nothing and their results are never stored, the query
// rope launches nothing and its result is written by the fused launch (at the kv_append, which
// follows it and precedes the attention). A 1-token decode step is launch-bound: this takes three
// launches off each MLA layer. The IR is unchanged (the CPU reference runs the four ops).
#include <map>
#include <set>

#include "compiler/passes/lowering_views.h"
#include "ir/ir.h"

namespace kplan::passes {

struct RopeAppend {
  const ir::Op* norm = nullptr;    // rms_norm of the latent part
  const ir::Op* k_rope = nullptr;  // rope of the key part
  const ir::Op* q_rope = nullptr;  // rope of the queries (null: the fused launch does the key side only)
};

struct RopeAppendFusions {
  std::map<const ir::Op*, RopeAppend> appends;       // kv_append -> what its launch absorbs
  std::map<const ir::Op*, const ir::Op*> absorbed;   // norm / rope -> the kv_append that launches it
  std::set<const ir::Value*> unstored;               // the norm's and the key rope's results
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes): the pattern above
// where the norm's and the key rope's results have no other reader than the concat (and the
// concat none but the kv_append), the ropes share positions and attributes, the query rope's
// result is read by that attention only and comes before the kv_append, and every source is
// stored in one dtype (the intermediates f32, or the cache bf16: each value is rounded once
// either way). Appends to `out`.
void find_rope_append_fusions(const ir::Function& fn, const std::map<const ir::Value*, View>& views, RopeAppendFusions& out);

// False when KPLAN_FUSE_ROPE_APPEND=0 (a compile without the fusion, for measuring it); another
// value than 0 or 1 is refused.
bool rope_append_fusion_enabled();

}  // namespace kplan::passes
