#include "ir/builder.h"

#include "ir/support/error.h"
#include "ir/infer.h"

namespace kplan::ir {

Op* Builder::create(OpKind kind, std::vector<Value*> operands, Attrs attrs,
                    std::vector<Type> declared) {
  std::vector<Type> types;
  for (const Value* v : operands) types.push_back(v->type());
  std::vector<Type> results;
  try {
    results = infer_result_types(kind, types, attrs, declared);
  } catch (const Error& e) {
    throw Error("building " + std::string(op_kind_name(kind)) + " in @" + fn_.name() + ": " +
                e.what());
  }
  auto op = std::make_unique<Op>(kind, std::move(operands), std::move(results), std::move(attrs));
  return before_ ? fn_.insert_before(before_, std::move(op)) : fn_.append(std::move(op));
}

namespace {
Attrs attrs_of(std::initializer_list<std::pair<std::string, Attr>> list) {
  Attrs a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}
}  // namespace

Value* Builder::weight(const std::string& name, const Type& type, const std::string& ckpt) {
  return create(OpKind::Weight, {}, attrs_of({{"name", name}, {"ckpt", ckpt}}), {type})->result();
}

Value* Builder::weight_stack(const std::string& pattern, int64_t count, const Type& type,
                             const std::string& ckpt) {
  return create(OpKind::WeightStack, {},
                attrs_of({{"name", pattern}, {"count", count}, {"ckpt", ckpt}}), {type})
      ->result();
}

void Builder::output(Value* v, const std::string& name) {
  create(OpKind::Output, {v}, attrs_of({{"name", name}}));
}

Value* Builder::slice(Value* x, int64_t axis, int64_t start, int64_t size) {
  return create(OpKind::Slice, {x}, attrs_of({{"axis", axis}, {"start", start}, {"size", size}}))
      ->result();
}

Value* Builder::reshape(Value* x, std::vector<Dim> shape) {
  return create(OpKind::Reshape, {x}, {}, {Type{x->type().dtype, std::move(shape)}})->result();
}

Value* Builder::transpose(Value* x, std::vector<int64_t> perm) {
  return create(OpKind::Transpose, {x}, attrs_of({{"perm", std::move(perm)}}))->result();
}

Value* Builder::concat(std::vector<Value*> xs, int64_t axis) {
  return create(OpKind::Concat, std::move(xs), attrs_of({{"axis", axis}}))->result();
}

Value* Builder::add(Value* a, Value* b) { return create(OpKind::Add, {a, b})->result(); }
Value* Builder::swiglu(Value* gate, Value* up) {
  return create(OpKind::Swiglu, {gate, up})->result();
}

Value* Builder::rms_norm(Value* x, Value* w, double eps) {
  return create(OpKind::RmsNorm, {x, w}, attrs_of({{"eps", eps}}))->result();
}

Value* Builder::matmul(Value* x, Value* w) { return create(OpKind::Matmul, {x, w})->result(); }

Value* Builder::matmul_int4(Value* x, Value* packed, Value* scale, int64_t group_size) {
  return create(OpKind::MatmulInt4, {x, packed, scale}, attrs_of({{"group_size", group_size}}))
      ->result();
}

Value* Builder::head_matmul(Value* x, Value* w) {
  return create(OpKind::HeadMatmul, {x, w})->result();
}

Value* Builder::lm_head(Value* x, Value* w) { return create(OpKind::LmHead, {x, w})->result(); }

Value* Builder::embedding(Value* ids, Value* table) {
  return create(OpKind::Embedding, {ids, table})->result();
}

Value* Builder::rope(Value* x, Value* positions, Attrs attrs) {
  return create(OpKind::Rope, {x, positions}, std::move(attrs))->result();
}

Value* Builder::kv_append(Value* cache, std::vector<Value*> parts) {
  parts.insert(parts.begin(), cache);
  return create(OpKind::KvAppend, std::move(parts))->result();
}

Value* Builder::kv_compact(Value* cache, Value* step, Value* keep) {
  return create(OpKind::KvCompact, {cache, step, keep})->result();
}

Value* Builder::gqa_attention(Value* q, Value* k, Value* v, double scale, int64_t context_window) {
  Attrs a = attrs_of({{"scale", scale}});
  if (context_window > 0) a.set("context_window", context_window);
  return create(OpKind::GqaAttention, {q, k, v}, a)->result();
}

std::pair<Value*, Value*> Builder::moe_router(Value* logits, Value* bias, Attrs attrs) {
  Op* op = create(OpKind::MoeRouter, {logits, bias}, std::move(attrs));
  return {op->result(0), op->result(1)};
}

}  // namespace kplan::ir
