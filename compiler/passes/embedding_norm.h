#pragma once
// select-kernels' embedding-norm fusion: a step's embedding gather whose first reader is an
// rms_norm over its rows (the first layer's input norm) is computed by that norm's launch
// (kernels_templates/embedding_norm.cuh): the block of a token reads its table row once, stores
// it as the embedding's result (the residual stream's start, which the first residual add reads
// later) and normalises it from registers. The gather's own launch (~3 us of a decode step inside
// its graph, for 14 KiB) is gone; the result is bit for bit the two launches'. The IR is
// unchanged (the CPU reference runs both ops).
#include <map>

#include "compiler/passes/lowering_views.h"
#include "compiler/passes/norm_matmuls.h"
#include "ir/ir.h"

namespace kplan::passes {

struct EmbeddingNorms {
  std::map<const ir::Op*, const ir::Op*> gather_of;  // rms_norm -> the embedding its launch gathers
  std::map<const ir::Op*, const ir::Op*> absorbed;   // embedding -> the rms_norm that launches it
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes): an embedding over a
// bf16 [vocab, H] table with whole contiguous rows as its result, whose first reader in program
// order is an rms_norm reading those rows as its input, with a bf16 [H] weight and whole
// contiguous rows as its result, and which no matmul's launch computes (`norms`: the norm fusion,
// found first). Appends to `out`.
void find_embedding_norms(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const NormMatmuls& norms,
                          EmbeddingNorms& out);

// False when KPLAN_FUSE_EMBED_NORM=0 (the gather's own launch, for measuring the fusion); another
// value than 0 or 1 is refused.
bool embedding_norms_enabled();

}  // namespace kplan::passes
