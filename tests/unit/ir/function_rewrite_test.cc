// ir::Function::apply: many edits in one pass (what mla-absorb and dce use so that a model of
// thousands of layers stays linear): ops appended by a builder move before their anchors in the
// order given, uses are replaced, erased ops go, and a bad edit changes nothing.
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "ir/ir.h"
#include "ir/printer.h"
#include "ir/support/error.h"

namespace kplan::ir {
namespace {

TEST(FunctionRewrite, MovesReplacesAndErasesInOnePass) {
  Function fn("f");
  Value* x = fn.add_arg("x", Type{DType::F32, {Dim(2), Dim(4)}});
  Builder b(fn);
  Value* a = b.add(x, x);       // op 0
  Value* old = b.add(a, x);     // op 1: replaced by `fresh`
  b.output(old, "y");           // op 2
  // Appended after the output, then moved before `old`'s op.
  Value* t = b.add(x, a);
  Value* fresh = b.add(t, t);
  Function::Rewrite r;
  r.moved = {{t->defining_op(), old->defining_op()}, {fresh->defining_op(), old->defining_op()}};
  r.replaced[old] = fresh;
  r.erased.insert(old->defining_op());
  fn.apply(r);
  const std::vector<Op*> ops = fn.ops();
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops[0], a->defining_op());
  EXPECT_EQ(ops[1], t->defining_op());
  EXPECT_EQ(ops[2], fresh->defining_op());
  EXPECT_EQ(ops[3]->kind(), OpKind::Output);
  EXPECT_EQ(ops[3]->operand(0), fresh);
}

TEST(FunctionRewrite, AnAnchorOutsideTheFunctionChangesNothing) {
  Function fn("f"), other("g");
  Value* x = fn.add_arg("x", Type{DType::F32, {Dim(3)}});
  Value* y = other.add_arg("y", Type{DType::F32, {Dim(3)}});
  Builder b(fn), c(other);
  Value* a = b.add(x, x);
  b.output(a, "out");
  Value* foreign = c.add(y, y);
  const std::string before = print_function(fn);
  Function::Rewrite r;
  r.moved = {{a->defining_op(), foreign->defining_op()}};
  EXPECT_THROW(fn.apply(r), Error);
  EXPECT_EQ(print_function(fn), before);
}

}  // namespace
}  // namespace kplan::ir
