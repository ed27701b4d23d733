#pragma once
// A lowered plan run step by step by the CPU launch emulator as the GPU runtime runs it: the
// smallest bucket that holds a step, padded as the runtime pads, and commits as @target_commit
// replays (lower_emulated_test.cc, lower_emulated_draft_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "launch_emulator.h"
#include "runtime/cpu/basic_ops.h"
#include "runtime/step_model.h"

namespace kplan::codegen::testing_util {

// A verify step over a tree of at most 32 nodes given by its parents (parents precede children):
// node i's ancestor mask, token token0 + step * i, position root + depth.
inline StepInput tree_step(const std::vector<int32_t>& parent, int32_t root, int32_t token0, int32_t step) {
  StepInput tree;
  tree.tree_mask.assign(parent.size(), 0);
  for (int32_t i = 0; i < static_cast<int32_t>(parent.size()); ++i) {
    int32_t depth = 0;
    for (int32_t a = i; a >= 0; a = parent[a], ++depth) tree.tree_mask[i] |= 1u << a;
    tree.tokens.push_back(token0 + step * i);
    tree.positions.push_back(root + depth - 1);
  }
  return tree;
}

class EmulatedTarget {
 public:
  EmulatedTarget(plan::LoweredPlan& lp) : lp_(lp), emu_(lp) {}

  // Runs the smallest bucket that holds the step at cache length `past`, padded as the runtime
  // pads (token 0, position 0, mask rows and columns of padding empty); returns the real rows.
  std::pair<std::vector<float>, std::vector<float>> forward(const StepInput& in, int32_t past) {
    const int64_t n = static_cast<int64_t>(in.tokens.size());
    const plan::Bucket* bucket = nullptr;
    for (const plan::Bucket& b : lp_.buckets)
      if (b.program == "target" && b.tokens >= n && (!bucket || b.tokens < bucket->tokens)) bucket = &b;
    EXPECT_NE(bucket, nullptr);
    const int64_t t = bucket->tokens, words = (t + 31) / 32, in_words = (n + 31) / 32;
    std::vector<uint32_t> mask(t * words, 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const bool visible = in.tree_mask.empty() ? j <= i : (in.tree_mask[i * in_words + j / 32] >> (j % 32)) & 1u;
        if (visible) mask[i * words + j / 32] |= 1u << (j % 32);
      }
    std::vector<int32_t> tokens = in.tokens, positions = in.positions;
    tokens.resize(t, 0);
    positions.resize(t, 0);
    emu_.write_input(plan::StepInputKind::Tokens, tokens);
    emu_.write_input(plan::StepInputKind::Positions, positions);
    emu_.write_input(plan::StepInputKind::TreeMask, mask);
    emu_.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{past});
    emu_.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(n)});
    run(*bucket);
    std::vector<float> logits, hidden;
    for (const plan::StepOutput& o : bucket->outputs) {
      if (o.kind == plan::OutputKind::TokenIds) continue;  // checked below, against the logits
      std::vector<float> rows = emu_.output(o);
      rows.resize(n * o.cols);  // drop the padding rows
      (o.kind == plan::OutputKind::Logits ? logits : hidden) = std::move(rows);
    }
    // Greedy selection on the device: next_tokens is the argmax of each real row's logits.
    for (const plan::StepOutput& o : bucket->outputs) {
      if (o.kind != plan::OutputKind::TokenIds) continue;
      const int32_t* ids = reinterpret_cast<const int32_t*>(emu_.slot(o.slot) + o.offset);
      const int64_t vocab = static_cast<int64_t>(logits.size()) / n;
      for (int64_t r = 0; r < n; ++r) EXPECT_EQ(ids[r], cpu::argmax(logits.data() + r * vocab, vocab)) << "row " << r;
    }
    return {logits, hidden};
  }

  // The bucket of `program` with the fewest tokens >= n (null when none).
  const plan::Bucket* bucket(const std::string& program, int64_t n) const {
    const plan::Bucket* found = nullptr;
    for (const plan::Bucket& b : lp_.buckets)
      if (b.program == program && b.tokens >= n && (!found || b.tokens < found->tokens)) found = &b;
    return found;
  }
  LaunchEmulator& emulator() { return emu_; }

  // The commit as the plan lowers it: the @target_commit bucket, keep[] in the Tokens input and
  // its length in TokenCount, one kv_compact launch per layer.
  // `program`: "target_commit" (one launch per "kv.L" cache) or "draft_commit" (per "dk.L", "dv.L").
  void commit(int32_t past, const std::vector<int32_t>& keep, const std::string& program = "target_commit") {
    const plan::Bucket* bucket = nullptr;
    for (const plan::Bucket& b : lp_.buckets)
      if (b.program == program) bucket = &b;
    ASSERT_NE(bucket, nullptr);
    size_t caches = 0;
    for (const plan::KvCache& kv : lp_.kv_caches) caches += (kv.name.rfind("kv.", 0) == 0) == (program == "target_commit");
    ASSERT_EQ(bucket->launches.size(), caches);
    std::vector<int32_t> tokens = keep;
    tokens.resize(bucket->tokens, 0);
    emu_.write_input(plan::StepInputKind::Tokens, tokens);
    emu_.write_input(plan::StepInputKind::CacheLength, std::vector<int32_t>{past});
    emu_.write_input(plan::StepInputKind::TokenCount, std::vector<int32_t>{static_cast<int32_t>(keep.size())});
    run(*bucket);
  }

  // Every launch of `b` through the launch emulator, plus the families it does not emulate yet (argmax: the CPU reference's
  // op; kv_compact: the in-place row moves of ir/OPS.md), read by parameter name.
  void run(const plan::Bucket& b) {
    for (const plan::Launch& l : b.launches) {
      const KernelSource& k = lp_.kernels.at(l.kernel);
      auto arg = [&](const char* name) -> const plan::LaunchArg& {
        for (size_t i = 0; i < k.signature.size(); ++i)
          if (k.signature[i].name == name) return l.args.at(i);
        throw Error("no argument " + std::string(name) + " in " + k.id);
      };
      auto pointer = [&](const char* name) -> uint8_t* {
        const plan::LaunchArg& a = arg(name);
        if (a.kind == plan::ArgKind::StepInput) return emu_.step_input(static_cast<plan::StepInputKind>(a.index));
        EXPECT_EQ(a.kind, plan::ArgKind::Buffer) << k.id << " " << name;
        return emu_.slot(a.index) + a.offset;
      };
      if (k.family == "argmax") {
        const int64_t vocab = kernel_param(k, "V"), stride = arg("row_stride").ival;
        const float* x = reinterpret_cast<const float*>(pointer("logits"));
        int32_t* out = reinterpret_cast<int32_t*>(pointer("out_ids"));
        for (int64_t r = 0; r < arg("n_rows").ival; ++r) out[r] = static_cast<int32_t>(cpu::argmax(x + r * stride, vocab));
      } else if (k.family == "kv_compact") {
        // A row of C + R elements of KV_DT (f32 or bf16).
        const int64_t row = (kernel_param(k, "C") + kernel_param(k, "R")) * static_cast<int64_t>(dtype_size(elem_dtype(kernel_param(k, "KV_DT"))));
        uint8_t* cache = pointer("cache");
        const int32_t start = *reinterpret_cast<int32_t*>(pointer("cache_len"));
        const int32_t* keep = reinterpret_cast<int32_t*>(pointer("keep"));
        const int32_t n = *reinterpret_cast<int32_t*>(pointer("n_keep"));
        for (int32_t i = 0; i < n; ++i) std::memmove(cache + (start + i) * row, cache + (start + keep[i]) * row, row);
      } else {
        emu_.run_launch(l);
      }
    }
  }

 private:
  plan::LoweredPlan& lp_;
  LaunchEmulator emu_;
};

}  // namespace kplan::codegen::testing_util
