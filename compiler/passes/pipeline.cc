#include "compiler/passes/pipeline.h"

#include <string>

#include "ir/support/error.h"
#include "ir/verifier.h"

namespace kplan::passes {

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      {"infer-shapes", "recompute every result type from operands and attributes; refuse mismatches", infer_shapes},
      {"mla-absorb", "absorb kv_b_proj into the query (W_UK) and output (W_UV): attention over the latent cache", mla_absorb},
      {"dce", "remove ops whose results nothing uses", dce},
  };
  return passes;
}

const Pass& find_pass(std::string_view name) {
  std::string names;
  for (const Pass& p : pipeline()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + std::string(p.name);
  }
  throw Error("unknown pass '" + std::string(name) + "' (passes: " + names + ")");
}

void run_pipeline(ir::Module& m, std::string_view stop_after) {
  if (!stop_after.empty()) find_pass(stop_after);  // a typo fails before any work
  ir::verify(m);
  for (const Pass& p : pipeline()) {
    p.run(m);
    try {
      ir::verify(m);
    } catch (const Error& e) {
      throw Error("after pass " + std::string(p.name) + ": " + e.what());
    }
    if (p.name == stop_after) return;
  }
}

}  // namespace kplan::passes
