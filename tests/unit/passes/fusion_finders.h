#pragma once
// Test helper: a function parsed from IR text, with select-kernels' views of it (4 tokens, context
// 16, f32 storage but where asked) and its fusion finders run over it in select-kernels' order (the
// residual adds, then the sibling matmuls, which leave a fused add's producer alone, then the
// norms in their first matmul's launch, which know the sibling groups, then the routers in their
// experts' launch, for a largest step of 4 tokens, then the embeddings in their first norm's, then
// the adds in the launch of the norm right after them).
#include <map>
#include <memory>
#include <set>
#include <string>

#include "compiler/passes/add_norm.h"
#include "compiler/passes/embedding_norm.h"
#include "compiler/passes/epilogue_adds.h"
#include "compiler/passes/norm_matmuls.h"
#include "compiler/passes/router_experts.h"
#include "compiler/passes/sibling_matmuls.h"
#include "ir/parser.h"

namespace kplan::testing_util {

struct Fusions {
  std::unique_ptr<ir::Module> module;
  passes::EpilogueFusions epilogue;
  passes::SiblingMatmuls siblings;
  passes::NormMatmuls norms;
  passes::RouterExperts routers;
  passes::EmbeddingNorms gathers;
  passes::AddNorms add_norms;
  const ir::Function& fn() const { return *module->functions().front(); }
  const ir::Op* op(size_t index) const { return fn().ops().at(index); }
};

// `bf16_results`: the indices of the ops whose results are stored as bf16 (storage-dtypes' choice);
// `norm_readers`: the kinds of first reader the norms fold into (passes::NormReader bits);
// `exact_norms`: those folds exact (NORM 3).
inline Fusions find_fusions(const std::string& text, const std::set<size_t>& bf16_results = {},
                            unsigned norm_readers = passes::NormReader::AnyReader, bool exact_norms = false) {
  Fusions f;
  f.module = ir::parse_module(text);
  std::map<const ir::Value*, DType> dtypes;
  for (size_t i : bf16_results) dtypes[f.op(i)->result()] = DType::BF16;
  const auto views = passes::compute_views(f.fn(), 4, 16, 0, &dtypes);
  passes::find_epilogue_adds(f.fn(), views, f.epilogue);
  passes::find_sibling_matmuls(f.fn(), views, f.epilogue, f.siblings);
  passes::find_norm_matmuls(f.fn(), views, f.siblings, f.norms, norm_readers, exact_norms);
  passes::find_router_experts(f.fn(), views, 4, f.routers);
  passes::find_router_logits(f.siblings, f.routers);
  passes::find_embedding_norms(f.fn(), views, f.norms, f.gathers);
  passes::find_add_norms(f.fn(), views, f.epilogue, f.norms, f.gathers, f.add_norms);
  return f;
}

}  // namespace kplan::testing_util
