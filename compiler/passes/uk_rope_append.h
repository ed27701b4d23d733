#pragma once
// select-kernels' W_UK-rope-append fusion: an MLA layer's fused rope-append (rope_append.h: the
// kv_append with its latent norm, key rope and query rope) and the absorbed W_UK product its
// attention reads (the head_matmul over W_UK read as [K, N], mla_absorb.cc) are one launch
// (kernels_templates/uk_rope_append.cuh) from the head_matmul's rule: W_UK's blocks, then the
// rope-append's. Neither reads what the other writes, and the head_matmul is the next launch after
// the kv_append, so the kv_append launches nothing and its work moves to the head_matmul's place
// (before the attention that reads both). A 1-token decode step's rope-append is a launch of ~2
// us inside its graph, mostly its own ramp and tail: this takes one launch off each MLA layer. The
// IR is unchanged (the CPU reference runs every op).
#include <map>

#include "compiler/passes/lowering_views.h"
#include "compiler/passes/rope_append.h"
#include "ir/ir.h"

namespace kplan::passes {

struct UkRopeAppends {
  std::map<const ir::Op*, const ir::Op*> append_of;  // head_matmul (W_UK) -> the fused kv_append its launch does
  std::map<const ir::Op*, const ir::Op*> absorbed;   // kv_append -> the head_matmul that launches it
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes) and its rope-append
// fusions: a fused kv_append with a query rope, whose next op that launches a kernel is a
// head_matmul over a [heads, K, N] weight view read as [K, N] (the absorbed W_UK), with as many
// heads as the query rope, whose result the attention reading that cache and query rope takes as
// its latent queries, its input stored in the rope-append's source dtype. Appends to `out`.
void find_uk_rope_appends(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const RopeAppendFusions& appends,
                          UkRopeAppends& out);

// False when KPLAN_FUSE_UK_APPEND=0 (the two launches, for measuring the fusion); another value
// than 0 or 1 is refused.
bool uk_rope_appends_enabled();

}  // namespace kplan::passes
