#pragma once
// select-kernels' sibling fusion: matmuls of the same activations (q_a_proj and
// kv_a_proj_with_mqa; a MoE layer's router with its shared expert's gate and up projections; an
// MLP's gate and up projections) computed by one launch (kernels_templates/matmul_siblings.cuh)
// in the steps whose matmuls run on the CUDA cores, where a decode step is launch-bound: the first
// sibling's rule launches for all of them, the later ones launch nothing and their results are
// placed at the first (plan-memory). Steps the op rule puts on the tensor cores launch each
// sibling's own instance from that same rule. The IR is unchanged.
// A group whose last two siblings are an MLP's gate and up projections read by nothing but one
// swiglu takes it too (the template's GLU 1: the launch writes silu(gate) * up, the swiglu
// launches nothing, its result is placed at the first sibling); steps where the siblings launch
// one by one launch the swiglu after them, from the same rule.
#include <map>
#include <vector>

#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowering_views.h"
#include "ir/ir.h"

namespace kplan::passes {

struct SiblingMatmuls {
  std::map<const ir::Op*, std::vector<const ir::Op*>> later;  // first sibling -> the later ones (1 or 2)
  std::map<const ir::Op*, const ir::Op*> first;               // later sibling -> the first
  std::map<const ir::Op*, const ir::Op*> glu;                 // first sibling -> the swiglu of its last two
  std::map<const ir::Op*, const ir::Op*> glu_of;              // that swiglu -> the first sibling
};

// The sibling groups of `fn` given its views: [N, K] bf16 weight matmuls (not lm_head, not a
// producer of a fused residual add) reading the same activations, whose results are whole
// contiguous rows stored in one dtype -- but an f32 first sibling may lead bf16 later ones (a
// router's f32 logits before its shared expert's bf16 gate and up; the template's YA_F32) -- up
// to 3 a group, in program order. Appends to `out`.
void find_sibling_matmuls(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const EpilogueFusions& epilogue,
                          SiblingMatmuls& out);

// False when KPLAN_FUSE_SIBLINGS=0 (a compile without the fusion, for measuring it); another value
// than 0 or 1 is refused.
bool sibling_matmuls_enabled();
// False when KPLAN_FUSE_F32_FIRST=0: a group's siblings all of one stored dtype (the router
// launched alone where the activations are bf16).
bool f32_first_siblings_enabled();
// False when KPLAN_FUSE_GLU=0: sibling groups without their swiglu.
bool glu_siblings_enabled();

}  // namespace kplan::passes
