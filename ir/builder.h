#pragma once
// Builder: creates typed ops in a Function (appending, or before a given op). Result types come
// from infer_result_types, so an op built here is well typed or the call throws kplan::Error.
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kplan::ir {

class Builder {
 public:
  explicit Builder(Function& fn) : fn_(fn) {}
  Function& function() { return fn_; }
  // New ops go before `op` (nullptr: append at the end, the default).
  void set_insert_before(const Op* op) { before_ = op; }

  // Generic creation. `declared` is needed only by reshape (and optional elsewhere).
  Op* create(OpKind kind, std::vector<Value*> operands, Attrs attrs = {},
             std::vector<Type> declared = {});

  Value* weight(const std::string& name, const Type& type, const std::string& ckpt = "target");
  Value* weight_stack(const std::string& pattern, int64_t count, const Type& type,
                      const std::string& ckpt = "target");
  void output(Value* v, const std::string& name);
  Value* slice(Value* x, int64_t axis, int64_t start, int64_t size);
  Value* reshape(Value* x, std::vector<Dim> shape);
  Value* transpose(Value* x, std::vector<int64_t> perm);
  Value* concat(std::vector<Value*> xs, int64_t axis);
  Value* add(Value* a, Value* b);
  Value* swiglu(Value* gate, Value* up);
  Value* rms_norm(Value* x, Value* w, double eps);
  Value* matmul(Value* x, Value* w);
  Value* matmul_int4(Value* x, Value* packed, Value* scale, int64_t group_size);
  Value* head_matmul(Value* x, Value* w);
  Value* lm_head(Value* x, Value* w);
  Value* embedding(Value* ids, Value* table);
  // attrs: theta, interleaved, scaling, [factor, original_max_position_embeddings, beta_fast,
  // beta_slow], attention_factor (see RopeAttrs in the model builder).
  Value* rope(Value* x, Value* positions, Attrs attrs);
  Value* kv_append(Value* cache, std::vector<Value*> parts);
  Value* kv_compact(Value* cache, Value* step, Value* keep);
  // context_window > 0: {context_window} (the queries see only the last N context keys and their
  // own rows, which are the last Tq keys); 0: no attribute, every key seen.
  Value* gqa_attention(Value* q, Value* k, Value* v, double scale, int64_t context_window = 0);
  // Returns {weights, ids}.
  std::pair<Value*, Value*> moe_router(Value* logits, Value* bias, Attrs attrs);

 private:
  Function& fn_;
  const Op* before_ = nullptr;
};

}  // namespace kplan::ir
