#include "ir/ir.h"

#include <algorithm>

#include "ir/support/error.h"

namespace kplan::ir {

Op::Op(OpKind kind, std::vector<Value*> operands, std::vector<Type> result_types, Attrs attrs)
    : kind_(kind), operands_(std::move(operands)), attrs_(std::move(attrs)) {
  for (size_t i = 0; i < result_types.size(); ++i)
    results_.push_back(std::unique_ptr<Value>(
        new Value(std::move(result_types[i]), this, static_cast<int>(i), "")));
}

Value* Function::add_arg(std::string name, Type type) {
  if (arg(name)) throw Error("@" + name_ + ": duplicate argument %" + name);
  args_.push_back(std::unique_ptr<Value>(
      new Value(std::move(type), nullptr, static_cast<int>(args_.size()), std::move(name))));
  return args_.back().get();
}

std::vector<Value*> Function::args() const {
  std::vector<Value*> out;
  for (const auto& a : args_) out.push_back(a.get());
  return out;
}

Value* Function::arg(std::string_view name) const {
  for (const auto& a : args_)
    if (a->name() == name) return a.get();
  return nullptr;
}

std::vector<Op*> Function::ops() const {
  std::vector<Op*> out;
  out.reserve(ops_.size());
  for (const auto& o : ops_) out.push_back(o.get());
  return out;
}

Op* Function::append(std::unique_ptr<Op> op) {
  ops_.push_back(std::move(op));
  return ops_.back().get();
}

Op* Function::insert_before(const Op* pos, std::unique_ptr<Op> op) {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o.get() == pos; });
  if (it == ops_.end()) throw Error("@" + name_ + ": insert_before: op not in this function");
  return ops_.insert(it, std::move(op))->get();
}

void Function::erase(const Op* op) {
  auto it = std::find_if(ops_.begin(), ops_.end(), [&](const auto& o) { return o.get() == op; });
  if (it == ops_.end()) throw Error("@" + name_ + ": erase: op not in this function");
  ops_.erase(it);
}

void Function::replace_all_uses(const Value* from, Value* to) {
  for (auto& op : ops_)
    for (size_t i = 0; i < op->num_operands(); ++i)
      if (op->operand(i) == from) op->set_operand(i, to);
}

void Function::apply(const Rewrite& r) {
  std::unordered_set<const Op*> present;
  for (const auto& o : ops_) present.insert(o.get());
  std::unordered_map<const Op*, std::vector<const Op*>> before;  // anchor -> ops, in order
  std::unordered_set<const Op*> moving;
  for (const auto& [op, anchor] : r.moved) {
    if (!present.count(op) || !present.count(anchor) || !moving.insert(op).second)
      throw Error("@" + name_ + ": rewrite: a moved op or its anchor is not in this function (or moves twice)");
    before[anchor].push_back(op);
  }
  std::unordered_map<const Op*, std::unique_ptr<Op>> held;
  for (auto& o : ops_)
    if (moving.count(o.get())) held[o.get()] = std::move(o);
  std::vector<std::unique_ptr<Op>> out;
  out.reserve(ops_.size());
  for (auto& o : ops_) {
    if (!o) continue;  // moved: placed before its anchor
    if (auto it = before.find(o.get()); it != before.end())
      for (const Op* m : it->second) out.push_back(std::move(held.at(m)));
    if (!r.erased.count(o.get())) out.push_back(std::move(o));
  }
  ops_ = std::move(out);
  if (r.replaced.empty()) return;
  for (auto& op : ops_)
    for (size_t i = 0; i < op->num_operands(); ++i)
      if (auto it = r.replaced.find(op->operand(i)); it != r.replaced.end()) op->set_operand(i, it->second);
}

std::vector<Op*> Function::users(const Value* v) const {
  std::vector<Op*> out;
  for (const auto& op : ops_)
    if (std::find(op->operands().begin(), op->operands().end(), v) != op->operands().end())
      out.push_back(op.get());
  return out;
}

std::vector<std::pair<std::string, Value*>> Function::outputs() const {
  std::vector<std::pair<std::string, Value*>> out;
  for (const auto& op : ops_)
    if (op->kind() == OpKind::Output && op->num_operands() == 1)
      if (const Attr* n = op->attrs().find("name"))
        if (auto* s = std::get_if<std::string>(n)) out.emplace_back(*s, op->operand(0));
  return out;
}

Value* Function::output_value(std::string_view name) const {
  for (auto& [n, v] : outputs())
    if (n == name) return v;
  return nullptr;
}

Function* Module::add_function(std::string name) {
  if (function(name)) throw Error("duplicate function @" + name);
  functions_.push_back(std::make_unique<Function>(std::move(name)));
  return functions_.back().get();
}

Function* Module::function(std::string_view name) const {
  for (const auto& f : functions_)
    if (f->name() == name) return f.get();
  return nullptr;
}

std::vector<Function*> Module::functions() const {
  std::vector<Function*> out;
  for (const auto& f : functions_) out.push_back(f.get());
  return out;
}

}  // namespace kplan::ir
