// The IR interpreter: view ops, INT4 matmul and the sampling helpers on hand-built functions,
// and, on whole synthesised models, the naive MLA IR (before mla-absorb) against the absorbed
// IR the backend runs.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/driver/compile.h"
#include "compiler/frontend/int4_pack.h"
#include "compiler/passes/weight_layout.h"
#include "ir/builder.h"
#include "ir/support/error.h"
#include "runtime/cpu/interpreter.h"
#include "tests/unit/cpu/cpu_test_util.h"

namespace kplan::cpu {
namespace {

using ir::Dim;
using ir::OpKind;
using ir::Type;

TensorPtr floats(std::vector<int64_t> shape, std::vector<float> v) {
  auto t = std::make_shared<Tensor>(Tensor::floats(std::move(shape)));
  t->f = std::move(v);
  return t;
}

TensorPtr ints(std::vector<int64_t> shape, std::vector<int32_t> v) {
  auto t = std::make_shared<Tensor>(Tensor::ints(std::move(shape)));
  t->i = std::move(v);
  return t;
}

// For functions that take everything as arguments.
const WeightTable& no_weights() {
  static const std::vector<plan::Weight> none;
  static const WeightTable table(none, "no plan");
  return table;
}

TEST(CpuInterpreter, ViewOpsAndCacheOps) {
  ir::Module m;
  ir::Function& fn = *m.add_function("f");
  const Dim T = Dim::sym("T"), S = Dim::sym("S");
  ir::Value* x = fn.add_arg("x", Type{DType::F32, {T, 3}});
  ir::Value* cache = fn.add_arg("cache", Type{DType::F32, {S, 3}});
  ir::Value* keep = fn.add_arg("keep", Type{DType::I32, {Dim::sym("A")}});
  ir::Builder b(fn);
  b.output(b.transpose(x, {1, 0}), "t");
  b.output(b.slice(x, 1, 1, 2), "s");
  b.output(b.concat({x, x}, 1), "c");
  b.output(b.reshape(x, {T, 3, 1}), "r");
  b.output(b.kv_append(cache, {b.slice(x, 1, 0, 1), b.slice(x, 1, 1, 2)}), "append");
  b.output(b.kv_compact(cache, x, keep), "compact");
  Interpreter run(fn, no_weights());
  auto out = run.run({{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})},
                      {"cache", floats({1, 3}, {9, 9, 9})},
                      {"keep", ints({1}, {1})}});
  EXPECT_EQ(out.at("t")->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out.at("t")->f, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(out.at("s")->f, (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(out.at("c")->f, (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(out.at("r")->shape, (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(out.at("append")->f, (std::vector<float>{9, 9, 9, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(out.at("compact")->f, (std::vector<float>{9, 9, 9, 4, 5, 6}));
  // A missing argument and a shape that contradicts the bound symbols are errors.
  EXPECT_THROW(run.run({{"x", floats({2, 3}, {1, 2, 3, 4, 5, 6})}}), Error);
  EXPECT_THROW(run.run({{"x", floats({2, 2}, {1, 2, 3, 4})},
                        {"cache", floats({1, 3}, {9, 9, 9})},
                        {"keep", ints({1}, {1})}}),
               Error);
}

TEST(CpuInterpreter, MatmulInt4EqualsMatmulOfDequantisedWeight) {
  std::mt19937 rng(2);
  const int64_t N = 5, K = 64;
  Matrix w = cpu_test::random_matrix(N, K, rng);
  PackedInt4 p = pack_int4(w.data, N, K, 32);
  std::vector<float> scale;
  for (uint16_t s : p.scale) scale.push_back(bf16_to_float(s));
  ir::Module m;
  ir::Function& fn = *m.add_function("f");
  ir::Value* x = fn.add_arg("x", Type{DType::F32, {Dim::sym("T"), K}});
  ir::Value* packed = fn.add_arg("packed", Type{DType::I32, {N, K / 8}});
  ir::Value* sc = fn.add_arg("scale", Type{DType::BF16, {N, K / 32}});
  ir::Value* dense = fn.add_arg("dense", Type{DType::F32, {N, K}});
  ir::Builder b(fn);
  b.output(b.matmul_int4(x, packed, sc, 32), "int4");
  b.output(b.matmul(x, dense), "dense");
  Interpreter run(fn, no_weights());
  Matrix xs = cpu_test::random_matrix(3, K, rng);
  auto out = run.run({{"x", floats({3, K}, xs.data)},
                      {"packed", ints({N, K / 8}, p.packed)},
                      {"scale", floats({N, K / 32}, scale)},
                      {"dense", floats({N, K}, unpack_int4(p))}});
  EXPECT_EQ(out.at("int4")->f, out.at("dense")->f);
}

TEST(CpuInterpreter, HeadMatmulTopKArgmaxLogSoftmax) {
  ir::Module m;
  ir::Function& fn = *m.add_function("f");
  ir::Value* x = fn.add_arg("x", Type{DType::F32, {1, 2, 2}});
  ir::Value* w = fn.add_arg("w", Type{DType::F32, {2, 1, 2}});
  ir::Value* v = fn.add_arg("v", Type{DType::F32, {2, 3}});
  ir::Builder b(fn);
  b.output(b.head_matmul(x, w), "hm");
  ir::Attrs k;
  k.set("k", int64_t{2});
  ir::Op* topk = b.create(OpKind::TopK, {v}, k);
  b.output(topk->result(0), "values");
  b.output(topk->result(1), "ids");
  b.output(b.create(OpKind::Argmax, {v})->result(), "argmax");
  b.output(b.create(OpKind::LogSoftmax, {v})->result(), "lsm");
  Interpreter run(fn, no_weights());
  auto out = run.run({{"x", floats({1, 2, 2}, {1, 2, 3, 4})},
                      {"w", floats({2, 1, 2}, {1, 1, 2, -1})},
                      {"v", floats({2, 3}, {0, 5, 5, 3, 1, 2})}});
  EXPECT_EQ(out.at("hm")->f, (std::vector<float>{3, 2}));  // head 0: 1+2, head 1: 6-4
  EXPECT_EQ(out.at("ids")->i, (std::vector<int32_t>{1, 2, 0, 2}));
  EXPECT_EQ(out.at("values")->f, (std::vector<float>{5, 5, 3, 2}));
  EXPECT_EQ(out.at("argmax")->i, (std::vector<int32_t>{1, 0}));
  const double z = std::log(1 + 2 * std::exp(5.0));
  EXPECT_NEAR(out.at("lsm")->f[0], -z, 1e-6);
}

// The absorbed IR (the full pipeline) computes what transformers' naive form (the IR before
// mla-absorb) computes, on whole models, with a committed cache and a tree step.
class CpuInterpreterModel : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuInterpreterModel, AbsorbedIrEqualsNaiveIr) {
  const auto& dirs = cpu_test::synth_preset(GetParam());
  CompileOptions naive_options;
  naive_options.model = dirs.target;
  naive_options.stop_after = "infer-shapes";
  CompileResult naive = compile_to_ir(naive_options);
  CompileOptions full_options;
  full_options.model = dirs.target;
  CompileResult full = compile_to_ir(full_options);
  auto count = [](const ir::Function& fn, OpKind k) {
    int n = 0;
    for (const ir::Op* op : fn.ops()) n += op->kind() == k;
    return n;
  };
  const ir::Function& nf = *naive.module->function("target");
  const ir::Function& ff = *full.module->function("target");
  const int layers = static_cast<int>(naive.target->config().num_hidden_layers);
  ASSERT_EQ(count(nf, OpKind::MlaAttentionExpanded), layers);
  ASSERT_EQ(count(ff, OpKind::MlaAttention), layers);
  ASSERT_EQ(count(ff, OpKind::MlaAttentionExpanded), 0);

  // Both functions' weights as a plan carries them, read from the checkpoint.
  std::vector<plan::Weight> plan_weights;
  const passes::WeightBytes bytes = [&](const std::string&, const std::string& name) {
    return naive.target->weights().get(name).bytes;
  };
  passes::add_function_weights({&nf, &ff}, bytes, plan_weights);
  const WeightTable weights(plan_weights, "tiny checkpoint");
  Interpreter a(nf, weights), b(ff, weights);
  const ModelConfig& c = naive.target->config();
  const int64_t row = c.kv_lora_rank + c.qk_rope_head_dim, S = 5, T = 3;
  std::mt19937 rng(9);
  Matrix cache = cpu_test::random_matrix(S, row, rng);
  std::map<std::string, TensorPtr> args = {
      {"tokens", ints({T}, {10, 20, 30})},
      {"positions", ints({T}, {5, 6, 6})},
      {"tree_mask", ints({T, 1}, {0b001, 0b011, 0b101})}};
  for (int l = 0; l < layers; ++l) args["kv." + std::to_string(l)] = floats({S, row}, cache.data);
  auto oa = a.run(args), ob = b.run(args);
  const Tensor &la = *oa.at("logits"), &lb = *ob.at("logits");
  for (int64_t t = 0; t < T; ++t)
    EXPECT_LT(cpu_test::relative_error(lb.f.data() + t * c.vocab_size, la.f.data() + t * c.vocab_size, c.vocab_size), 1e-5)
        << "token " << t;
}

INSTANTIATE_TEST_SUITE_P(Presets, CpuInterpreterModel, ::testing::Values("tiny", "tiny2"));

}  // namespace
}  // namespace kplan::cpu
