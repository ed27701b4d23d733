#include "ir/printer.h"

#include <unordered_map>

namespace kplan::ir {

namespace {

// Result numbering of one function: %0, %1, ... in definition order.
class Numbering {
 public:
  explicit Numbering(const Function& fn) {
    int next = 0;
    for (const Op* op : fn.ops())
      for (size_t i = 0; i < op->num_results(); ++i) ids_[op->result(i)] = next++;
  }
  std::string ref(const Value* v) const {
    if (v->is_arg()) return "%" + v->name();
    auto it = ids_.find(v);
    return it == ids_.end() ? "%<undefined>" : "%" + std::to_string(it->second);
  }

 private:
  std::unordered_map<const Value*, int> ids_;
};

std::string attrs_str(const Attrs& attrs) {
  std::string s = "{";
  bool first = true;
  for (const auto& [k, v] : attrs.entries()) {
    if (!first) s += ", ";
    first = false;
    s += k + " = " + attr_str(v);
  }
  return s + "}";
}

std::string op_line(const Numbering& n, const Op& op) {
  std::string s;
  for (size_t i = 0; i < op.num_results(); ++i) s += (i ? ", " : "") + n.ref(op.result(i));
  if (op.num_results()) s += " = ";
  s += op.name();
  if (op.num_operands()) {
    s += "(";
    for (size_t i = 0; i < op.num_operands(); ++i) s += (i ? ", " : "") + n.ref(op.operand(i));
    s += ")";
  }
  if (!op.attrs().empty()) s += " " + attrs_str(op.attrs());
  if (op.num_results()) {
    s += " : ";
    for (size_t i = 0; i < op.num_results(); ++i)
      s += (i ? ", " : "") + op.result(i)->type().str();
  }
  return s;
}

}  // namespace

std::string value_ref(const Function& fn, const Value* v) { return Numbering(fn).ref(v); }

std::string print_op(const Function& fn, const Op& op) { return op_line(Numbering(fn), op); }

std::string print_function(const Function& fn) {
  Numbering n(fn);
  std::string s = "func @" + fn.name() + "(";
  auto args = fn.args();
  for (size_t i = 0; i < args.size(); ++i)
    s += (i ? ", " : "") + n.ref(args[i]) + ": " + args[i]->type().str();
  s += ") {\n";
  for (const Op* op : fn.ops()) s += "  " + op_line(n, *op) + "\n";
  return s + "}\n";
}

std::string print_module(const Module& m) {
  std::string s = "module ";
  if (!m.attrs().empty()) s += attrs_str(m.attrs()) + " ";
  s += "{\n";
  for (const Function* fn : m.functions()) {
    std::string f = print_function(*fn);
    // Indent the function body by two spaces.
    size_t start = 0;
    while (start < f.size()) {
      size_t end = f.find('\n', start);
      s += "  " + f.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return s + "}\n";
}

}  // namespace kplan::ir
