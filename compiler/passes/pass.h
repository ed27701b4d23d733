#pragma once
// A compiler pass: a name (used by --dump-ir-after), a one-line statement of what it does, and a
// function that rewrites the module in place. The pipeline (pipeline.h) lists them in order.
#include <string_view>

#include "ir/ir.h"

namespace kplan::passes {

struct Pass {
  std::string_view name;
  std::string_view summary;
  void (*run)(ir::Module& m);
};

// The passes, one file each.
void infer_shapes(ir::Module& m);  // infer_shapes.cc
void mla_absorb(ir::Module& m);    // mla_absorb.cc
void dce(ir::Module& m);           // dce.cc

}  // namespace kplan::passes
