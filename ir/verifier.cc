#include "ir/verifier.h"

#include <set>
#include <unordered_set>

#include "ir/support/error.h"
#include "ir/infer.h"
#include "ir/printer.h"

namespace kplan::ir {

namespace {

// "%12 = rms_norm(%11, %3)": enough to find the op in a dump.
std::string op_head(const Function& fn, const Op& op) {
  std::string s;
  for (size_t i = 0; i < op.num_results(); ++i)
    s += (i ? ", " : "") + value_ref(fn, op.result(i));
  if (op.num_results()) s += " = ";
  s += op.name();
  s += "(";
  for (size_t i = 0; i < op.num_operands(); ++i)
    s += (i ? ", " : "") + (op.operand(i) ? value_ref(fn, op.operand(i)) : "<null>");
  return s + ")";
}

// Symbols are bound by argument dims that are one symbol alone ("T", not "S+T").
void check_symbols(const Function& fn, std::vector<std::string>& out) {
  std::set<std::string> bound;
  for (const Value* a : fn.args())
    for (const Dim& d : a->type().shape)
      if (d.symbols.size() == 1 && d.constant == 0) bound.insert(d.symbols[0]);
  // `where` is built only for a problem (op_head numbers the whole function).
  auto check = [&](const Type& t, auto where) {
    for (const Dim& d : t.shape)
      for (const auto& s : d.symbols)
        if (!bound.count(s)) {
          out.push_back("@" + fn.name() + ": " + where() + " has type " + t.str() + ": symbol " +
                        s + " is not bound by any argument dim");
          return;
        }
  };
  for (const Value* a : fn.args())
    check(a->type(), [&] { return "argument %" + a->name(); });
  for (const Op* op : fn.ops())
    for (size_t i = 0; i < op->num_results(); ++i)
      check(op->result(i)->type(),
            [&] { return op_head(fn, *op) + " result " + std::to_string(i); });
}

void verify_function(const Function& fn, std::vector<std::string>& out) {
  std::unordered_set<const Value*> defined;
  std::set<std::string> output_names;
  for (const Value* a : fn.args()) defined.insert(a);
  check_symbols(fn, out);
  std::unordered_set<const Value*> later;
  for (const Op* op : fn.ops())
    for (size_t i = 0; i < op->num_results(); ++i) later.insert(op->result(i));

  for (const Op* op : fn.ops()) {
    auto report = [&](const std::string& msg) {
      out.push_back("@" + fn.name() + ": " + op_head(fn, *op) + ": " + msg);
    };
    bool operands_ok = true;
    for (size_t i = 0; i < op->num_operands(); ++i) {
      const Value* v = op->operand(i);
      if (!v) {
        report("operand " + std::to_string(i) + " is null");
        operands_ok = false;
      } else if (!defined.count(v)) {
        report("operand " + std::to_string(i) + " (" + value_ref(fn, v) + ") " +
               (later.count(v) ? "is used before its definition"
                               : "is not defined in this function"));
        operands_ok = false;
      }
    }
    if (operands_ok) {
      std::vector<Type> operand_types, declared;
      for (const Value* v : op->operands()) operand_types.push_back(v->type());
      for (size_t i = 0; i < op->num_results(); ++i) declared.push_back(op->result(i)->type());
      try {
        auto inferred = infer_result_types(op->kind(), operand_types, op->attrs(), declared);
        if (inferred.size() != declared.size()) {
          report("has " + std::to_string(declared.size()) + " results, expected " +
                 std::to_string(inferred.size()));
        } else {
          for (size_t i = 0; i < inferred.size(); ++i)
            if (!(inferred[i] == declared[i]))
              report("result " + std::to_string(i) + " has type " + declared[i].str() +
                     ", expected " + inferred[i].str());
        }
      } catch (const Error& e) {
        report(e.what());
      }
    }
    if (op->kind() == OpKind::Output) {
      if (const Attr* n = op->attrs().find("name"))
        if (auto* s = std::get_if<std::string>(n))
          if (!output_names.insert(*s).second) report("duplicate output name \"" + *s + "\"");
    }
    for (size_t i = 0; i < op->num_results(); ++i) defined.insert(op->result(i));
  }
}

}  // namespace

std::vector<std::string> verify_diagnostics(const Module& m) {
  std::vector<std::string> out;
  for (const Function* fn : m.functions()) verify_function(*fn, out);
  return out;
}

void verify(const Module& m) {
  auto problems = verify_diagnostics(m);
  if (problems.empty()) return;
  std::string msg = "invalid IR: " + problems[0];
  if (problems.size() > 1) msg += " (and " + std::to_string(problems.size() - 1) + " more)";
  throw Error(msg);
}

}  // namespace kplan::ir
