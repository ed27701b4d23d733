// Dims, types and attributes: text forms and the element-count rule reshape relies on.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/attr.h"
#include "ir/support/error.h"
#include "ir/type.h"

namespace kplan::ir {
namespace {

TEST(IrDim, PrintsCanonicalForm) {
  EXPECT_EQ(Dim(256).str(), "256");
  EXPECT_EQ(Dim::sym("T").str(), "T");
  EXPECT_EQ((Dim::sym("T") + Dim::sym("S")).str(), "S+T");
  EXPECT_EQ((Dim::sym("S") + Dim(8)).str(), "S+8");
  EXPECT_EQ((Dim::sym("S") + Dim(-1)).str(), "S-1");
}

TEST(IrDim, ParsesWhatItPrints) {
  for (const char* text : {"0", "256", "T", "S+T", "S+8", "A+S", "S-1", "S+T+T"}) {
    auto d = Dim::parse(text);
    ASSERT_TRUE(d) << text;
    EXPECT_EQ(d->str(), text);
  }
  EXPECT_EQ(Dim::parse("T+S")->str(), "S+T");  // canonical order
  EXPECT_EQ(*Dim::parse("T+S"), *Dim::parse("S+T"));
}

TEST(IrDim, RefusesMalformedText) {
  for (const char* text : {"", "+", "S+", "-T", "S*T", "3x", "S + T"})
    EXPECT_FALSE(Dim::parse(text)) << text;
}

TEST(IrType, PrintsDtypeAndShape) {
  Type t{DType::F32, {Dim::sym("T"), Dim(256)}};
  EXPECT_EQ(t.str(), "f32[T, 256]");
  EXPECT_EQ((Type{DType::U32, {}}).str(), "u32[]");
}

TEST(IrType, ElementCountMatchesSymbolsAndConstants) {
  auto T = Dim::sym("T");
  EXPECT_TRUE(same_element_count({T, 768}, {T, 4, 192}));
  EXPECT_TRUE(same_element_count({T, 4, 192}, {4, T, 192}));
  EXPECT_FALSE(same_element_count({T, 768}, {T, 4, 190}));
  EXPECT_FALSE(same_element_count({T, 768}, {Dim::sym("S"), 768}));
  EXPECT_FALSE(same_element_count({T + Dim::sym("S"), 2}, {T, Dim::sym("S"), 2}));
}

TEST(IrAttr, FloatsPrintShortAndStayFloats) {
  EXPECT_EQ(format_float(1e-6), "1e-06");
  EXPECT_EQ(format_float(2.5), "2.5");
  EXPECT_EQ(format_float(10000.0), "10000.0");
  EXPECT_EQ(format_float(0.14433756729740646), "0.14433756729740646");
  EXPECT_EQ(attr_str(Attr{int64_t{8}}), "8");
  EXPECT_EQ(attr_str(Attr{true}), "true");
  EXPECT_EQ(attr_str(Attr{std::string("a\"b\\c")}), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(attr_str(Attr{std::vector<int64_t>{0, 2, 1}}), "[0, 2, 1]");
}

TEST(IrAttr, TypedGettersNameTheKey) {
  Attrs a;
  a.set("eps", 1e-6);
  a.set("k", int64_t{4});
  a.set("eps", 1e-5);  // replaces in place
  ASSERT_EQ(a.entries().size(), 2u);
  EXPECT_EQ(a.entries()[0].first, "eps");
  EXPECT_DOUBLE_EQ(a.get_float("eps"), 1e-5);
  EXPECT_DOUBLE_EQ(a.get_float("k"), 4.0);  // ints read as floats
  try {
    a.get_int("eps");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "attribute 'eps' must be an integer");
  }
  try {
    a.get_string("name");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "missing attribute 'name'");
  }
}

}  // namespace
}  // namespace kplan::ir
