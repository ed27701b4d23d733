// plan-memory: where every value lives. Step inputs and KV caches get their slots (a cache
// "kv.L" is one persistent slot of max_context rows (and the largest step's tokens of slack
// rows past them, which only padded tokens read), shared by every program that names it; a
// drafter cache "dk.L" / "dv.L" likewise, with the block's rows beyond); a drafter context
// step's "hidden.L" are the target's "hidden.L" outputs (it runs right after the target step);
// each op result that owns a buffer gets a slot sized at the largest bucket, reusing a freed
// scratch slot (best fit) once the last reader of its previous value has run; outputs keep
// their own slots. kv_append / kv_compact update their cache in place: their results are
// recorded as aliases of the cache operand, and verify_memory checks that every alias updates a
// persistent cache. A residual add done in its producer's epilogue (select-kernels' fusions)
// has its result placed at the producer; the values only it read are never stored. A later
// sibling matmul's result is placed at the first sibling, whose launch writes it. Offsets in
// the arena are assigned by the plan assembler (assign_arena_offsets).
#include <algorithm>
#include <set>
#include <tuple>

#include "compiler/passes/lower_state.h"
#include "compiler/passes/lowering_views.h"
#include "compiler/passes/op_rules.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

using ir::OpKind;
using ir::Value;

class MemoryPlanner {
 public:
  explicit MemoryPlanner(LowerState& s) : s_(s) {}

  void run() {
    add_step_inputs();
    for (const ir::Function* fn : s_.programs) plan_function(*fn);
  }

 private:
  uint32_t add_slot(const std::string& name, plan::SlotRole role, uint64_t bytes) {
    plan::BufferSlot slot;
    slot.name = name;
    slot.role = role;
    slot.size = std::max<uint64_t>(bytes, 4);
    s_.buffers.slots.push_back(slot);
    return static_cast<uint32_t>(s_.buffers.slots.size() - 1);
  }

  void add_step_inputs() {
    // The drafter's block is a step too: its tokens and positions may outnumber the largest bucket's.
    const uint64_t t = static_cast<uint64_t>(std::max(s_.max_tokens, s_.draft_rows));
    const std::tuple<plan::StepInputKind, const char*, uint64_t> inputs[] = {
        {plan::StepInputKind::Tokens, "step.tokens", 4 * t},
        {plan::StepInputKind::Positions, "step.positions", 4 * t},
        {plan::StepInputKind::TreeMask, "step.tree_mask", 4 * t * ((t + 31) / 32)},
        {plan::StepInputKind::CacheLength, "step.cache_length", 4},
        {plan::StepInputKind::TokenCount, "step.token_count", 4}};
    for (const auto& [kind, name, bytes] : inputs) {
      const uint32_t slot = add_slot(name, plan::SlotRole::Input, bytes);
      s_.step_inputs.push_back({kind, slot});
    }
  }

  // Arguments: the step's tokens / positions / tree mask (and a commit's keep list, which the
  // host writes into the Tokens input; the drafter's block tokens and positions, and its context
  // rows' positions) are step inputs; "kv.L", "dk.L", "dv.L" are the persistent caches;
  // "kv_step.L" etc. (a commit's pending rows) already sit in the cache, so they need no storage.
  void bind_arg(const ir::Function& fn, const Value* a) {
    const std::string& n = a->name();
    if (n == "tokens" || n == "keep" || n == "block_tokens") {
      s_.storage[a] = {Storage::Kind::StepInput, static_cast<uint32_t>(plan::StepInputKind::Tokens)};
    } else if (n == "positions" || n == "ctx_positions" || n == "block_positions") {
      s_.storage[a] = {Storage::Kind::StepInput, static_cast<uint32_t>(plan::StepInputKind::Positions)};
    } else if (n == "tree_mask") {
      s_.storage[a] = {Storage::Kind::StepInput, static_cast<uint32_t>(plan::StepInputKind::TreeMask)};
    } else if (fn.name() == "draft_context" && n.rfind("hidden.", 0) == 0) {
      s_.storage[a] = target_output(n);
    } else if (is_cache_arg(n)) {
      const int64_t width = eval_shape(a->type(), 0).at(1);
      const uint64_t row_bytes = static_cast<uint64_t>(width) * dtype_size(stored_dtype(s_, a));
      auto it = kv_slot_.find(n);
      if (it == kv_slot_.end()) {
        const uint64_t rows = static_cast<uint64_t>(cache_rows(n, s_.options.max_context, s_.draft_rows));
        // Slack rows past the cache's: a verify step's padded tokens near the end of the context
        // sit at rows past it; their appends are skipped (kv_cache.cuh), but each one's attention
        // still reads the rows it sees, its own among them, up to the largest step's tokens past
        // the last row. The slot holds them so those reads stay inside it (their results are
        // dropped; no real token sees those rows).
        const uint64_t slack = static_cast<uint64_t>(std::max<int64_t>(s_.max_tokens, 0));
        uint64_t bytes = 0;
        if (__builtin_mul_overflow(row_bytes, rows + slack, &bytes))
          throw Error("codegen: KV cache " + n + " of " + std::to_string(rows) + " rows x " + std::to_string(row_bytes) +
                      " bytes overflows 64 bits");
        const uint32_t slot = add_slot(n, plan::SlotRole::Persistent, bytes);
        s_.kv_caches.push_back({n, slot, row_bytes, rows});
        it = kv_slot_.emplace(n, slot).first;
      }
      s_.storage[a] = {Storage::Kind::Slot, it->second};
    } else if (is_pending_arg(n)) {
      s_.storage[a] = {Storage::Kind::None, 0};
    } else {
      throw Error("codegen: @" + fn.name() + " argument %" + n + " has no GPU binding");
    }
  }

  // Where @target keeps its output `name` (planned already: @target comes first).
  Storage target_output(const std::string& name) const {
    for (const ir::Function* fn : s_.programs) {
      if (fn->name() != "target") continue;
      for (const ir::Op* op : fn->ops())
        if (op->kind() == OpKind::Output && op->attrs().get_string("name") == name) return s_.storage.at(view_root(op->operand(0)));
    }
    throw Error("codegen: @draft_context reads %" + name + ", which @target does not return (capture that layer)");
  }

  void plan_function(const ir::Function& fn) {
    for (const Value* a : fn.args()) bind_arg(fn, a);
    const std::vector<ir::Op*> ops = fn.ops();
    // Liveness: the last op reading each root (kv_append reads a concat's parts itself; a fused
    // kv_append reads what its absorbed norm and ropes read, rope_append.h; a matmul what the norm
    // its launch computes reads, norm_matmuls.h; a MoE's experts what their router reads,
    // router_experts.h; a norm what the add its launch computes reads, add_norm.h; a W_UK
    // head_matmul what the fused kv_append its launch does reads, uk_rope_append.h).
    std::map<const Value*, int64_t> last_use;
    std::set<const Value*> kept;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (const Value* v : ops[i]->operands()) {
        last_use[view_root(v)] = static_cast<int64_t>(i);
        if (ops[i]->kind() == OpKind::KvAppend && v->defining_op() && v->defining_op()->kind() == OpKind::Concat) {
          for (const Value* part : v->defining_op()->operands()) last_use[view_root(part)] = static_cast<int64_t>(i);
        }
      }
      // A fused kv_append's launch runs at its own place, or at its W_UK's (uk_rope_append.h).
      auto uk = s_.uk_appends.append_of.find(ops[i]);
      auto fused = s_.rope_append.appends.find(uk != s_.uk_appends.append_of.end() ? uk->second : ops[i]);
      if (fused != s_.rope_append.appends.end()) {
        for (const ir::Op* absorbed : {fused->second.norm, fused->second.k_rope, fused->second.q_rope})
          if (absorbed)
            for (const Value* v : absorbed->operands()) last_use[view_root(v)] = static_cast<int64_t>(i);
      }
      auto norm = s_.norm_matmuls.consumers.find(ops[i]);
      if (norm != s_.norm_matmuls.consumers.end())
        for (const Value* v : norm->second.norm->operands()) last_use[view_root(v)] = static_cast<int64_t>(i);
      auto add = s_.add_norms.add_of.find(ops[i]);
      if (add != s_.add_norms.add_of.end())
        for (const Value* v : add->second->operands()) last_use[view_root(v)] = static_cast<int64_t>(i);
      auto router = s_.router_experts.router_of.find(ops[i]);
      if (router != s_.router_experts.router_of.end())
        for (const Value* v : router->second->operands()) last_use[view_root(v)] = static_cast<int64_t>(i);
      if (ops[i]->kind() == OpKind::Output) kept.insert(view_root(ops[i]->operand(0)));
    }
    std::set<uint32_t> free;
    auto slot_for = [&](uint64_t bytes, bool keep) {
      uint32_t slot = UINT32_MAX;
      if (!keep) {  // best fit among free scratch slots
        for (uint32_t f : free) {
          const uint64_t size = s_.buffers.slots[f].size;
          if (size >= bytes && (slot == UINT32_MAX || size < s_.buffers.slots[slot].size)) slot = f;
        }
        if (slot != UINT32_MAX) free.erase(slot);
      }
      if (slot == UINT32_MAX) {
        const std::string n = std::to_string(s_.buffers.slots.size());
        slot = add_slot(keep ? "out." + n : "scratch." + n, keep ? plan::SlotRole::Output : plan::SlotRole::Scratch, bytes);
      }
      return slot;
    };
    // A MoE whose combine its shared down projection does (epilogue_adds.h) leaves its per-pair
    // rows in its scratch for that launch: the slot is freed there, not at the MoE.
    std::map<const ir::Op*, uint32_t> scratch_read_later;
    for (size_t i = 0; i < ops.size(); ++i) {
      const ir::Op& op = *ops[i];
      if (op.kind() == OpKind::KvAppend || op.kind() == OpKind::KvCompact) {
        s_.aliases[op.result()] = op.operand(0);
        s_.storage[op.result()] = s_.storage.at(view_root(op.operand(0)));
      }
      // The attention's cache operand is a kv_append's in-place result: its dtype is the cache's.
      const bool mla = op.kind() == OpKind::MlaAttention;
      const DType kv = mla ? stored_dtype(s_, storage_root(op.operand(2))) : DType::F32;
      const DType queries = mla ? stored_dtype(s_, storage_root(op.operand(0))) : DType::F32;
      const uint64_t scratch = scratch_bytes(op, s_.max_tokens, s_.options.max_context, s_.options.arch, kv, queries);
      if (scratch) s_.scratch[&op] = slot_for(scratch, false);
      auto place = [&](const Value* v) {
        if (s_.unstored(v) || s_.storage.count(v)) return;  // never written / placed by its producer
        const uint64_t bytes = dtype_size(stored_dtype(s_, v)) * product(eval_shape(v->type(), s_.max_tokens));
        s_.storage[v] = {Storage::Kind::Slot, slot_for(bytes, kept.count(v) > 0)};
      };
      // A producer with an epilogue add writes the add's result: its slot is taken here, before
      // this op's operands can free theirs.
      auto fused = s_.epilogue.producers.find(&op);
      if (fused != s_.epilogue.producers.end()) place(fused->second.out);
      // The later sibling matmuls are computed here too (sibling_matmuls.h).
      auto later = s_.siblings.later.find(&op);
      if (later != s_.siblings.later.end())
        for (const ir::Op* sibling : later->second) place(sibling->result());
      auto glu = s_.siblings.glu.find(&op);  // and their swiglu
      if (glu != s_.siblings.glu.end()) place(glu->second->result());
      // A router the group's launch runs (router_experts.h): its ids and weights are written there,
      // and its count is a persistent word (zeroed with the arena at load, put back to 0 by each launch).
      auto routed = s_.router_experts.logits_router.find(&op);
      if (routed != s_.router_experts.logits_router.end()) {
        for (size_t r = 0; r < routed->second->num_results(); ++r) place(routed->second->result(r));
        if (!s_.route_counts.count(routed->second))
          s_.route_counts[routed->second] = add_slot("route." + std::to_string(s_.route_counts.size()), plan::SlotRole::Persistent, 4);
      }
      // An attention's combine launch writes its W_UV product (attention_uv.h): placed here, before
      // the attention's scratch (the partials that launch reads) is freed.
      auto uv = s_.attention_uv.uv_of.find(&op);
      if (uv != s_.attention_uv.uv_of.end()) place(uv->second->result());
      if (owns_result_storage(fn, op))
        for (size_t r = 0; r < op.num_results(); ++r) place(op.result(r));
      if (scratch) {
        auto down = s_.epilogue.combined_by.find(&op);
        if (down != s_.epilogue.combined_by.end())
          scratch_read_later[down->second] = s_.scratch.at(&op);
        else
          free.insert(s_.scratch.at(&op));
      }
      auto rows = scratch_read_later.find(&op);
      if (rows != scratch_read_later.end()) free.insert(rows->second);
      for (const auto& [root, last] : last_use) {
        if (last != static_cast<int64_t>(i) || kept.count(root)) continue;
        auto it = s_.storage.find(root);
        if (it != s_.storage.end() && it->second.kind == Storage::Kind::Slot &&
            s_.buffers.slots[it->second.index].role == plan::SlotRole::Scratch) {
          free.insert(it->second.index);
        }
      }
    }
  }

  LowerState& s_;
  std::map<std::string, uint32_t> kv_slot_;
};

}  // namespace

void plan_memory(LowerState& s) {
  s.buffers = {};
  s.step_inputs.clear();
  s.kv_caches.clear();
  s.storage.clear();
  s.scratch.clear();
  s.aliases.clear();
  MemoryPlanner(s).run();
  verify_memory(s);
}

void verify_memory(const LowerState& s) {
  std::set<std::pair<const ir::Function*, uint32_t>> updated;  // (program, cache slot)
  for (const auto& [result, operand] : s.aliases) {
    const ir::Op* op = result->defining_op();
    const std::string what = std::string(op->name()) + " result (" + result->type().str() + ")";
    const ir::Value* root = operand;
    while (root->defining_op() && is_view_op(*root->defining_op())) root = root->defining_op()->operand(0);
    if (root->defining_op() || !is_cache_arg(root->name())) {
      throw Error("plan-memory: " + what + " updates a value in place that is not a KV cache argument");
    }
    const Storage& st = s.storage.at(root);
    const Storage& rs = s.storage.at(result);
    if (st.kind != Storage::Kind::Slot || s.buffers.slots.at(st.index).role != plan::SlotRole::Persistent) {
      throw Error("plan-memory: " + what + " updates %" + root->name() + ", which is not in a persistent slot");
    }
    if (rs.kind != st.kind || rs.index != st.index) throw Error("plan-memory: " + what + " is not stored in its cache's slot");
    // One in-place update per cache and program (a second would race with the first's readers).
    const ir::Function* program = nullptr;
    for (const ir::Function* p : s.programs)
      for (const ir::Op* o : p->ops())
        if (o == op) program = p;
    if (!updated.emplace(program, st.index).second) {
      throw Error("plan-memory: %" + root->name() + " is updated in place twice in @" + program->name());
    }
  }
  // Every root an op writes is somewhere.
  for (const ir::Function* fn : s.programs)
    for (const ir::Op* op : fn->ops())
      if (owns_result_storage(*fn, *op))
        for (size_t r = 0; r < op->num_results(); ++r)
          if (!s.storage.count(op->result(r)) && !s.unstored(op->result(r)))
            throw Error("plan-memory: a result of " + std::string(op->name()) + " has no slot");
}

}  // namespace kplan::passes
