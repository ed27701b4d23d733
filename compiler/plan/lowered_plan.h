#pragma once
// What the lowering (IR ops -> launches, compiler/codegen) hands the plan assembler: the launch
// program with arch-free kernel sources. plan_assemble.h compiles the sources for every
// requested arch and adds the header, config, tokenizer and IR text to make the Plan.
#include <vector>

#include "compiler/codegen/kernel_instance.h"
#include "schemas/plan_model.h"

namespace kplan::plan {

struct LoweredPlan {
  // Unique kernel instances; Launch::kernel indexes this list.
  std::vector<codegen::KernelSource> kernels;
  // Device weights; LaunchArg::weight indexes this list. Views into the mapped checkpoint are
  // fine (they must stay mapped until the plan is written). Keep checkpoint tensors under their
  // checkpoint names and bytes where the kernels take them as they are: the CPU reference can then
  // run the plan on machines without a GPU.
  std::vector<Weight> weights;
  BufferPlan buffers;  // slots with sizes/alignments; offsets may be left to assign_arena_offsets
  std::vector<StepInputBinding> step_inputs;
  std::vector<KvCache> kv_caches;
  std::vector<Bucket> buckets;
  Limits limits;
};

}  // namespace kplan::plan
