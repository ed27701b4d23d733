// emit-plan: the annotated IR -> plan::LoweredPlan, mechanically. For each bucket, every op's
// recorded kernels are launched with arguments bound from the views at the bucket's token count
// and the storage plan-memory chose; grids come from the families' geometry. Outputs become
// StepOutputs (logits, captured hidden states, device-selected next tokens).
#include <map>

#include "compiler/codegen/launch_geometry.h"
#include "compiler/passes/lower_state.h"
#include "compiler/passes/op_rules.h"
#include "ir/support/error.h"

namespace kplan::passes {
namespace {

using plan::LaunchArg;

class Emitter {
 public:
  explicit Emitter(LowerState& s) : s_(s) {}

  plan::LoweredPlan run() {
    plan::LoweredPlan out;
    out.weights = std::move(s_.weights);
    out.buffers = s_.buffers;
    out.step_inputs = s_.step_inputs;
    out.kv_caches = s_.kv_caches;
    for (const BucketSpec& b : s_.buckets) out.buckets.push_back(emit_bucket(b, out));
    out.limits = {s_.max_tokens, s_.options.max_tree_nodes, s_.options.max_context};
    return out;
  }

 private:
  LaunchArg ptr(const View& v) const {
    if (!v.root) throw Error("codegen: a deferred concat was read by a kernel");
    const uint64_t bytes = static_cast<uint64_t>(v.offset) * dtype_size(v.dtype);
    const ir::Op* def = v.root->defining_op();
    if (def && (def->kind() == ir::OpKind::Weight || def->kind() == ir::OpKind::WeightStack)) {
      const std::string source = def->attrs().has("ckpt") ? def->attrs().get_string("ckpt") : "target";
      return LaunchArg::weight(s_.weight_index.at({source, def->attrs().get_string("name")}), bytes);
    }
    auto it = s_.storage.find(v.root);
    if (it == s_.storage.end()) throw Error("codegen: lowering reached a value with no storage (" + v.root->type().str() + ")");
    switch (it->second.kind) {
      case Storage::Kind::Slot: return LaunchArg::buffer(it->second.index, bytes);
      case Storage::Kind::StepInput:
        if (bytes != 0) throw Error("codegen: a view into a step input is not supported");
        return LaunchArg::step_input(static_cast<plan::StepInputKind>(it->second.index));
      case Storage::Kind::Weight:
      case Storage::Kind::None: break;
    }
    throw Error("codegen: a kernel reads %" + v.root->name() + ", which has no storage on the GPU");
  }

  uint32_t kernel_index(const codegen::KernelSource& k, plan::LoweredPlan& out) {
    auto it = kernel_of_.find(k.id);
    if (it != kernel_of_.end()) return it->second;
    out.kernels.push_back(k);
    return kernel_of_[k.id] = static_cast<uint32_t>(out.kernels.size() - 1);
  }

  void add_output(const ir::Op& op, const std::map<const ir::Value*, View>& views, plan::Bucket& bucket) {
    const std::string& name = op.attrs().get_string("name");
    // The step's rows already sit in the cache; kv_compact updated the cache in place.
    if (is_pending_arg(name) || is_cache_arg(name)) return;
    const View& v = views.at(op.operand(0));
    const auto st = v.root ? s_.storage.find(v.root) : s_.storage.end();
    if (st == s_.storage.end() || st->second.kind != Storage::Kind::Slot || v.offset != 0 || !is_contiguous(v)) {
      throw Error("codegen: output " + name + " is not a whole buffer");
    }
    plan::StepOutput o;
    o.slot = st->second.index;
    o.dtype = v.dtype;
    if (name == "next_tokens" && v.dtype == DType::I32 && v.shape.size() == 1) {
      o.kind = plan::OutputKind::TokenIds;
      o.rows = v.shape[0];
      o.cols = 1;
    } else if (v.shape.size() == 2 && ((name == "logits" && v.dtype == DType::F32) ||
                                       (name.rfind("hidden.", 0) == 0 && (v.dtype == DType::F32 || v.dtype == DType::BF16)))) {
      o.kind = name == "logits" ? plan::OutputKind::Logits : plan::OutputKind::Hidden;
      if (o.kind == plan::OutputKind::Hidden) o.layer = std::stoll(name.substr(7));
      o.rows = v.shape[0];
      o.cols = v.shape[1];
    } else if (v.shape.size() == 2 && ((name == "top_log_probs" && v.dtype == DType::F32) || (name == "top_ids" && v.dtype == DType::I32))) {
      o.kind = name == "top_ids" ? plan::OutputKind::TopIds : plan::OutputKind::TopLogProbs;
      o.rows = v.shape[0];
      o.cols = v.shape[1];
    } else {
      throw Error("codegen: unknown output " + name + " (" + op.operand(0)->type().str() + ")");
    }
    bucket.outputs.push_back(o);
  }

  plan::Bucket emit_bucket(const BucketSpec& spec, plan::LoweredPlan& out) {
    const ir::Function& fn = *spec.program;
    const std::map<const ir::Value*, View> views = compute_views(fn, spec.tokens, s_.options.max_context, s_.draft_rows, &s_.stored_dtypes);
    plan::Bucket bucket;
    bucket.program = fn.name();
    bucket.tokens = static_cast<uint32_t>(spec.tokens);
    const std::vector<ir::Op*> ops = fn.ops();
    for (size_t n = 0; n < ops.size(); ++n) {
      const ir::Op& op = *ops[n];
      if (op.kind() == ir::OpKind::Output) {
        add_output(op, views, bucket);
        continue;
      }
      auto recorded = s_.kernels.find(&op);
      if (recorded == s_.kernels.end()) continue;  // views, weights, concats
      RuleContext ctx;
      ctx.fn = &fn;
      ctx.op_index = static_cast<int64_t>(n);
      ctx.tokens = spec.tokens;
      ctx.max_tokens = s_.max_tokens;
      ctx.max_context = s_.options.max_context;
      ctx.arch = s_.options.arch;
      ctx.bf16_activations = stores_bf16_activations(s_, fn);
      ctx.views = &views;
      ctx.selected = &recorded->second;
      attach_fusions({s_.epilogue, s_.siblings, s_.rope_append, s_.norm_matmuls, s_.router_experts, s_.attention_uv, s_.embedding_norms, s_.add_norms,
                      s_.uk_appends},
                     op, ctx);
      ctx.ptr = [&](const View& v) { return ptr(v); };
      ctx.scratch = [&](const ir::Op& o) { return LaunchArg::buffer(s_.scratch.at(&o)); };
      ctx.route_count = [&](const ir::Op& o) { return LaunchArg::buffer(s_.route_counts.at(&o)); };
      lower_op(op, ctx);
      for (LaunchSpec& l : ctx.launches) {
        plan::Launch launch;
        launch.kernel = kernel_index(l.kernel, out);
        const codegen::LaunchDims d = codegen::launch_dims(l.kernel, l.rows, l.batch);
        launch.grid = d.grid;
        launch.block = d.block;
        launch.smem_bytes = d.smem_bytes;
        launch.cluster = d.cluster;
        launch.grid_x_per_sm = d.grid_x_per_sm;
        if (d.grid_x_per_sm > 0) launch.grid[0] = 0;
        launch.args = std::move(l.args);
        launch.tensor_maps = std::move(l.tensor_maps);
        launch.note = "op " + std::to_string(n) + ": " + std::string(op.name()) + " -> " + l.kernel.id;
        bucket.launches.push_back(std::move(launch));
      }
    }
    return bucket;
  }

  LowerState& s_;
  std::map<std::string, uint32_t> kernel_of_;
};

}  // namespace

void emit_plan(LowerState& s) { s.lowered = Emitter(s).run(); }

}  // namespace kplan::passes
