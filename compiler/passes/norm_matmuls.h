#pragma once
// select-kernels' norm fusion: an rms_norm whose first reader is a dense [N, K] matmul (a plain
// one, lm_head, or a sibling group's first matmul) computed by that matmul's launch in the steps
// whose matmuls run on the CUDA cores (the templates' NORM: each x value scaled by its norm
// weight as it is loaded, each token's sum of squares taken beside the dot products, the sums
// scaled by 1 / sqrt(mean + eps) in the epilogue). A decode step is launch-bound at its narrow
// launches, and every layer has two norms before matmuls (three with q_a's): this takes them,
// and the final norm before lm_head, off the step. When the norm has other readers (a MoE
// layer's routed experts) the fused launch writes its result too (NORM 2), so they read it as
// before. Steps the op rule puts on the tensor cores launch the norm from the matmul's rule, then
// the matmul as unfused. The IR is unchanged (the CPU reference runs the norm).
#include <map>

#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/sibling_matmuls.h"
#include "ir/ir.h"

namespace kplan::passes {

struct NormMatmul {
  const ir::Op* norm = nullptr;  // the rms_norm the matmul's launch computes
  bool store = false;            // other readers: the launch writes the norm's result too (NORM 2)
};

struct NormMatmuls {
  std::map<const ir::Op*, NormMatmul> consumers;   // matmul (a group's first sibling) -> its norm
  std::map<const ir::Op*, const ir::Op*> absorbed;  // rms_norm -> the matmul whose rule launches it
};

// The fusions of `fn` given its views (select-kernels', with stored dtypes) and its sibling
// groups: a norm over contiguous rows with a bf16 weight, its input rows in f32 or bf16, its
// result whole contiguous rows, whose first reader in program order is a matmul on a whole bf16
// [N, K] weight that reads it as its activations (or a sibling group's first member); when others
// read it too, its result must be stored in its input's dtype (the fused launch writes it in
// the dtype it reads); `readers_taken`: the kinds of first reader folded into (NormReader bits).
// Appends to `out`.
enum NormReader : unsigned { LmHead = 1u, Siblings = 2u, Matmul = 4u, AnyReader = 7u };
void find_norm_matmuls(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const SiblingMatmuls& siblings,
                       NormMatmuls& out, unsigned readers_taken = AnyReader);

// The kinds of first reader a norm is folded into (bits of NormReader): all with
// KPLAN_FUSE_NORM=1, none by default or with 0 (opt-in: measured slower on the H200,
// norm_matmuls.cc), the listed ones with a comma list of lm_head, siblings (a sibling group's
// first), matmul (a lone dense matmul); anything else is refused.
unsigned norm_matmul_readers();
// True when some kind is (norm_matmul_readers() != 0).
bool norm_matmuls_enabled();

}  // namespace kplan::passes
