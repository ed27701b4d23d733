#pragma once
// select-kernels' add-norm fusion: a residual add that no producer's epilogue takes, followed
// directly (no launch between them) by an rms_norm of its sum (a layer's post-attention norm), is computed by that norm's
// launch (kernels_templates/add_norm.cuh): the block of a token reads both rows once, stores the
// sum as the add's result (the residual stream, which later adds read) and normalises it from
// registers, bit for bit the two launches'. In a K2.6 decode step this is the first layer's add:
// the gathered rows are bf16 where the residual stream is f32, so o_proj's epilogue cannot take it
// (epilogue_adds.h), and it was a launch of its own (~3 us of a 1-token step inside its graph).
// The IR is unchanged (the CPU reference runs both ops).
#include <map>

#include "compiler/passes/embedding_norm.h"
#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/norm_matmuls.h"
#include "ir/ir.h"

namespace kplan::passes {

struct AddNorms {
  std::map<const ir::Op*, const ir::Op*> add_of;    // rms_norm -> the add its launch computes
  std::map<const ir::Op*, const ir::Op*> absorbed;  // add -> the rms_norm that launches it
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes): an add of two
// distinct contiguous [T, H] operands, f32 or bf16, whose result (contiguous rows of that shape,
// f32 or bf16) is read first by the next op that launches a kernel, an rms_norm with a bf16 [H] weight and
// contiguous rows as its result, where no epilogue does the add (`epilogue`), no matmul's launch
// computes the norm (`norms`) and no gather is in the norm's launch (`gathers`). Appends to `out`.
void find_add_norms(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const EpilogueFusions& epilogue,
                    const NormMatmuls& norms, const EmbeddingNorms& gathers, AddNorms& out);

// False when KPLAN_FUSE_ADD_NORM=0 (the add's own launch, for measuring the fusion); another
// value than 0 or 1 is refused.
bool add_norms_enabled();

}  // namespace kplan::passes
