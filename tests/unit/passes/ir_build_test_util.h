#pragma once
// Shared helpers of the builder/pass tests: configs from tests/data, op counting, printing.
#include <map>
#include <string>

#include "compiler/driver/build_ir.h"
#include "compiler/frontend/draft_config.h"
#include "compiler/frontend/model_config.h"
#include "ir/ir.h"

namespace kplan::testing {

inline std::string data_path(const std::string& rel) {
  return std::string(KPLAN_TEST_DATA_DIR) + "/" + rel;
}

inline ModelConfig config(const std::string& rel) { return load_model_config(data_path(rel)); }
inline ModelConfig tiny() { return config("configs/tiny.json"); }
inline ModelConfig tiny2() { return config("configs/tiny2.json"); }
inline ModelConfig k26() { return config("kimi-k2.6/config.json"); }
inline DraftConfig tiny_draft() { return load_draft_config(data_path("configs/draft-tiny.json")); }

// tiny with routed experts stored INT4 the way K2.6 ships them (same ignore list).
inline ModelConfig tiny_int4() {
  ModelConfig c = tiny();
  c.quant.enabled = true;
  c.quant.quant_method = "compressed-tensors";
  c.quant.format = "pack-quantized";
  c.quant.group_size = 32;
  c.quant.ignore = {"re:.*self_attn.*", "re:.*shared_experts.*",
                    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*"};
  return c;
}

inline std::map<ir::OpKind, int> count_ops(const ir::Function& fn) {
  std::map<ir::OpKind, int> n;
  for (const ir::Op* op : fn.ops()) ++n[op->kind()];
  return n;
}

inline int count(const ir::Function& fn, ir::OpKind k) { return count_ops(fn)[k]; }

}  // namespace kplan::testing
