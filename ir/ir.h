#pragma once
// The kplan IR: a Module of Functions; each Function is one block of Ops in SSA form. Values are
// function arguments or op results and carry a Type (dtype + symbolic shape). ir/OPS.md defines
// every op.
//
// Walking a function:
//   for (const Op* op : fn.ops()) {
//     if (op->kind() == OpKind::RmsNorm) { double eps = op->attrs().get_float("eps"); ... }
//     const Value* x = op->operand(0);           // x->type().dtype, x->type().shape
//     const Value* y = op->result(0);            // y->defining_op() == op
//   }
//   fn.args(): the arguments in order (named); fn.outputs(): the `output` ops' (name, value) pairs.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/attr.h"
#include "ir/op_kind.h"
#include "ir/type.h"

namespace kplan::ir {

class Op;
class Function;

class Value {
 public:
  const Type& type() const { return type_; }
  void set_type(Type t) { type_ = std::move(t); }
  // The defining op, or nullptr for a function argument.
  Op* defining_op() const { return def_; }
  bool is_arg() const { return def_ == nullptr; }
  // Result index within the defining op, or argument index.
  int index() const { return index_; }
  // Argument name ("tokens", "kv.0"); empty for op results (printed as %N).
  const std::string& name() const { return name_; }

 private:
  friend class Op;
  friend class Function;
  Value(Type t, Op* def, int index, std::string name)
      : type_(std::move(t)), def_(def), index_(index), name_(std::move(name)) {}
  Type type_;
  Op* def_;
  int index_;
  std::string name_;
};

class Op {
 public:
  Op(OpKind kind, std::vector<Value*> operands, std::vector<Type> result_types, Attrs attrs = {});
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  OpKind kind() const { return kind_; }
  std::string_view name() const { return op_kind_name(kind_); }

  size_t num_operands() const { return operands_.size(); }
  Value* operand(size_t i) const { return operands_.at(i); }
  const std::vector<Value*>& operands() const { return operands_; }
  void set_operand(size_t i, Value* v) { operands_.at(i) = v; }

  size_t num_results() const { return results_.size(); }
  Value* result(size_t i = 0) const { return results_.at(i).get(); }

  const Attrs& attrs() const { return attrs_; }
  Attrs& attrs() { return attrs_; }

 private:
  OpKind kind_;
  std::vector<Value*> operands_;
  std::vector<std::unique_ptr<Value>> results_;
  Attrs attrs_;
};

class Function {
 public:
  explicit Function(std::string name) : name_(std::move(name)) {}
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;

  const std::string& name() const { return name_; }  // without '@'

  Value* add_arg(std::string name, Type type);
  const std::vector<std::unique_ptr<Value>>& arg_storage() const { return args_; }
  std::vector<Value*> args() const;
  // nullptr when absent.
  Value* arg(std::string_view name) const;

  // Ops in order (one block).
  std::vector<Op*> ops() const;
  size_t num_ops() const { return ops_.size(); }
  Op* append(std::unique_ptr<Op> op);
  // Inserts before `pos` (which must be in this function); returns the inserted op.
  Op* insert_before(const Op* pos, std::unique_ptr<Op> op);
  // Removes an op; its results must have no remaining uses (checked by the verifier afterwards).
  void erase(const Op* op);

  // Rewrites every operand use of `from` to `to`.
  void replace_all_uses(const Value* from, Value* to);

  // Many edits in one pass, so a pass that rewrites every layer stays linear in the ops (one
  // insert_before / erase / replace_all_uses each costs a pass over them): each op of `moved`
  // (already in this function, e.g. appended by a Builder) goes just before its anchor, in the
  // order listed; every operand use of a key of `replaced` becomes its value; `erased` ops go.
  // Throws kplan::Error, changing nothing, when an op or anchor is not in this function.
  struct Rewrite {
    std::vector<std::pair<const Op*, const Op*>> moved;  // (op, anchor)
    std::unordered_map<const Value*, Value*> replaced;
    std::unordered_set<const Op*> erased;
  };
  void apply(const Rewrite& rewrite);
  // Ops that use `v` as an operand, in order.
  std::vector<Op*> users(const Value* v) const;

  // The `output` ops as (name, value), in order; output_value(name) is nullptr when absent.
  std::vector<std::pair<std::string, Value*>> outputs() const;
  Value* output_value(std::string_view name) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<Value>> args_;
  std::vector<std::unique_ptr<Op>> ops_;
};

class Module {
 public:
  Function* add_function(std::string name);
  // nullptr when absent.
  Function* function(std::string_view name) const;
  std::vector<Function*> functions() const;

  // Module facts (model dims for readers of a dump); printed in `module {...} {`.
  const Attrs& attrs() const { return attrs_; }
  Attrs& attrs() { return attrs_; }

 private:
  std::vector<std::unique_ptr<Function>> functions_;
  Attrs attrs_;
};

}  // namespace kplan::ir
