#pragma once
// What the lowering stages (compiler/passes, emit-plan last) hand the plan assembler: the launch
// program with arch-free kernel sources. compiler/plan/plan_assemble.h compiles the sources for
// every requested arch and adds the header, spec, tokenizer and IR text to make the Plan.
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "schemas/plan_model.h"

namespace kplan::plan {

struct LoweredPlan {
  // Unique kernel instances; Launch::kernel indexes this list.
  std::vector<codegen::KernelSource> kernels;
  // The weights table (weight-layout): every weight any function names, by (source, name);
  // LaunchArg::weight indexes it. Views into the mapped checkpoint are fine (they must stay
  // mapped until the plan is written). Checkpoint tensors keep their names and bytes where the
  // kernels take them as they are, so the CPU reference runs the plan's IR on them.
  std::vector<Weight> weights;
  BufferPlan buffers;  // slots with sizes/alignments; offsets may be left to assign_arena_offsets
  std::vector<StepInputBinding> step_inputs;
  std::vector<KvCache> kv_caches;
  std::vector<Bucket> buckets;
  Limits limits;
};

}  // namespace kplan::plan
