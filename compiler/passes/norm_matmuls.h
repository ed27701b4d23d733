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
// Exact folds (the default, for a lone matmul's norm with bf16 rows: an MLA layer's q_a norm
// before q_b): the launch normalises its block's rows first, as the norm launch would store them
// (the template's NORM 3, rms_norm.cuh's own row), and streams those: the same results bit for
// bit, one launch fewer. A step whose instance's block is not the norm launch's size (the
// tensor-core tiles) launches the norm first.
#include <map>

#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/sibling_matmuls.h"
#include "ir/ir.h"

namespace kplan::passes {

struct NormMatmul {
  const ir::Op* norm = nullptr;  // the rms_norm the matmul's launch computes
  bool store = false;            // other readers: the launch writes the norm's result too (NORM 2)
  bool exact = false;            // rounded first as the norm stores its rows (NORM 3), not folded into the sums (NORM 1)
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
// `exact`: the folds are exact ones (NormMatmul::exact), taken only for norms whose result is bf16
// rows no other op reads.
enum NormReader : unsigned { LmHead = 1u, Siblings = 2u, Matmul = 4u, AnyReader = 7u };
void find_norm_matmuls(const ir::Function& fn, const std::map<const ir::Value*, View>& views, const SiblingMatmuls& siblings,
                       NormMatmuls& out, unsigned readers_taken = AnyReader, bool exact = false);

// The norm folds a plan is compiled with (KPLAN_FUSE_NORM): by default (or "exact") the exact folds
// into lone matmuls; 0 none; 1 the summed-in folds (NORM 1 / 2) into every kind of reader; a comma
// list of lm_head, siblings (a sibling group's first), matmul (a lone dense matmul) the summed-in
// folds into those only (each measured slower than the norm launch on the H200, or changing a
// golden's near-tie: norm_matmuls.cc); anything else is refused.
struct NormFolds {
  unsigned readers = 0;  // bits of NormReader
  bool exact = false;
};
NormFolds norm_folds();

}  // namespace kplan::passes
