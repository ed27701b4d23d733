#include "runtime/gpu/gpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "ir/support/dtype.h"
#include "ir/support/error.h"
#include "runtime/gpu/cuda_driver.h"
#include "runtime/gpu/kv_moves.h"
#include "runtime/gpu/launch_resolve.h"

namespace kplan::gpu {

// One launch resolved for this device (launch_resolve.h): argument bytes, tensor maps, grid; a
// library call (plan::Kernel::library) its call too (library_matmul.h).
struct GpuExecutor::LaunchParams {
  ResolvedLaunch launch;
  std::unique_ptr<LibraryMatmul> library;
};

namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Programmatic dependent launch pays where kernels are short and launch-bound: on the H200 the
// bundled pair's steps of 1, 4 and 8 tokens ran 5% faster with it, those of 16 to 128 tokens
// 6-14% slower (bench/RESULTS.md, 2026-12-01 13:55), so only buckets up to 8 tokens use it.
constexpr uint32_t kPdlMaxTokens = 8;

// KPLAN_PDL: "small" (the default: buckets up to kPdlMaxTokens), "all", "none" -- for measuring.
uint32_t pdl_tokens_from_env() {
  const char* v = std::getenv("KPLAN_PDL");
  const std::string mode = v && *v ? v : "small";
  if (mode == "small") return kPdlMaxTokens;
  if (mode == "all") return UINT32_MAX;
  if (mode == "none") return 0;
  throw Error("KPLAN_PDL='" + mode + "': give small (the default), all or none");
}

// "sm_90" -> 90 (0 when unreadable).
int sm_version(const std::string& arch) {
  return arch.rfind("sm_", 0) == 0 ? std::atoi(arch.c_str() + 3) : 0;
}

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

}  // namespace

GpuExecutor::GpuExecutor(std::shared_ptr<const GpuModel> model, Options options)
    : model_(std::move(model)), cu_(&model_->driver()), source_(model_->source()) {
  auto start = std::chrono::steady_clock::now();
  use_graphs_ = options.use_graphs && !env_flag("KPLAN_NO_GRAPHS");
  pdl_max_tokens_ = options.use_pdl && sm_version(model_->device().arch) >= 90 ? pdl_tokens_from_env() : 0;
  try {
    model_->make_current();
    CUstream stream = nullptr;
    cuda_check(*cu_, cu_->cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    stream_ = stream;

    const plan::Plan& p = plan();
    arena_bytes_ = std::max<uint64_t>(p.buffers.arena_size, 256);
    CUdeviceptr arena = 0;
    cuda_check(*cu_, cu_->cuMemAlloc(&arena, arena_bytes_),
               source_ + ": cannot allocate the " + std::to_string(arena_bytes_) + "-byte activation arena");
    arena_ = arena;
    clear_arena();

    // Pinned staging: kInputStages areas for the step inputs, then every output of the largest bucket.
    uint64_t inputs = 0, outputs = 0;
    // The step inputs' slots as one span of the arena: a step writes them with one copy, from a
    // host image that keeps every input's last value (an input a step leaves out stays as it was).
    uint64_t begin = UINT64_MAX, end = 0;
    for (const plan::StepInputBinding& s : p.step_inputs) inputs += align_up(p.buffers.slots[s.slot].size, 64);
    for (const plan::StepInputBinding& s : p.step_inputs) {
      begin = std::min(begin, p.buffers.slots[s.slot].offset);
      end = std::max(end, p.buffers.slots[s.slot].offset + p.buffers.slots[s.slot].size);
    }
    // One span only when no other slot lies inside it (the planner puts the inputs first).
    bool span = begin < end;
    for (size_t i = 0; i < p.buffers.slots.size() && span; ++i) {
      const plan::BufferSlot& s = p.buffers.slots[i];
      const bool input = std::any_of(p.step_inputs.begin(), p.step_inputs.end(),
                                     [&](const plan::StepInputBinding& b) { return b.slot == i; });
      if (!input && s.offset < end && s.offset + s.size > begin) span = false;
    }
    if (span) {
      inputs_begin_ = begin;
      inputs_image_.assign(static_cast<size_t>(end - begin), 0);
      inputs = std::max(inputs, align_up(end - begin, 64));
    }
    for (const plan::Bucket& b : p.buckets) {
      uint64_t n = 0;
      for (const plan::StepOutput& o : b.outputs)
        n += align_up(static_cast<uint64_t>(o.rows * o.cols) * dtype_size(o.dtype), 64);
      outputs = std::max(outputs, n);
    }
    input_stage_bytes_ = inputs;
    pinned_bytes_ = std::max<uint64_t>(inputs * kInputStages + outputs, 64);
    void* pinned = nullptr;
    cuda_check(*cu_, cu_->cuMemHostAlloc(&pinned, pinned_bytes_, 0), "cuMemHostAlloc");
    pinned_ = static_cast<uint8_t*>(pinned);

    prepare_launches();
    if (use_graphs_) build_graphs();
  } catch (...) {
    release();
    throw;
  }
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

GpuExecutor::~GpuExecutor() { release(); }

void GpuExecutor::release() {
  cu_->cuCtxSetCurrent(static_cast<CUcontext>(model_->context()));
  if (stream_) cu_->cuStreamSynchronize(static_cast<CUstream>(stream_));
  for (void* g : graphs_)
    if (g) cu_->cuGraphExecDestroy(static_cast<CUgraphExec>(g));
  graphs_.clear();
  for (auto& [key, g] : chain_graphs_) cu_->cuGraphExecDestroy(static_cast<CUgraphExec>(g));
  chain_graphs_.clear();
  params_.clear();  // the library calls' descriptors, then their handle
  library_handle_.reset();
  if (arena_) cu_->cuMemFree(arena_);
  arena_ = 0;
  if (library_workspace_) cu_->cuMemFree(library_workspace_);
  library_workspace_ = 0;
  if (pinned_) cu_->cuMemFreeHost(pinned_);
  pinned_ = nullptr;
  if (stream_) cu_->cuStreamDestroy(static_cast<CUstream>(stream_));
  stream_ = nullptr;
}

void GpuExecutor::prepare_launches() {
  const plan::Plan& p = plan();
  const DeviceAddresses at{arena_, model_->weights_base(), &model_->weight_offsets(), model_->device().sm_count};
  params_.clear();
  params_.resize(p.buckets.size());
  for (size_t b = 0; b < p.buckets.size(); ++b) {
    for (size_t i = 0; i < p.buckets[b].launches.size(); ++i) {
      const plan::Launch& l = p.buckets[b].launches[i];
      const std::string what = source_ + ": launch " + std::to_string(i) + " (" + p.kernels[l.kernel].id + ") of bucket " +
                               p.buckets[b].program + "/" + std::to_string(p.buckets[b].tokens);
      LaunchParams lp{resolve_launch(model_->driver(), p, l, at, what), nullptr};
      if (!p.kernels[l.kernel].library.empty()) {
        if (!library_handle_) library_handle_ = std::make_unique<LibraryHandle>(cublaslt(what), what);
        if (!library_workspace_) {
          CUdeviceptr ws = 0;
          cuda_check(*cu_, cu_->cuMemAlloc(&ws, kLibraryWorkspaceBytes), source_ + ": cannot allocate the cuBLASLt workspace");
          library_workspace_ = ws;
        }
        lp.library = std::make_unique<LibraryMatmul>(*library_handle_, p.kernels[l.kernel], l, lp.launch.cells.data(), library_workspace_, what);
      }
      params_[b].push_back(std::move(lp));
    }
  }
}

void GpuExecutor::enqueue(const plan::Bucket& bucket) {
  for (size_t i = 0; i < bucket.launches.size(); ++i) enqueue_launch(bucket, i);
}

void GpuExecutor::enqueue_launch(const plan::Bucket& bucket, size_t i) {
  const size_t b = bucket_index(bucket);
  const plan::Launch& l = bucket.launches[i];
  LaunchParams& lp = params_[b][i];
  auto fail = [&](const std::string& why) {
    throw Error(source_ + ": launch " + std::to_string(i) + " (" + plan().kernels[l.kernel].id + ") of bucket " + bucket.program +
                "/" + std::to_string(bucket.tokens) + why);
  };
  if (lp.library) {
    if (const std::string why = lp.library->run(static_cast<CUstream>(stream_)); !why.empty()) fail(": " + why);
    return;
  }
  const CUresult r = launch_resolved(*cu_, static_cast<CUfunction>(model_->function(l.kernel)), lp.launch,
                                     static_cast<CUstream>(stream_), bucket.tokens <= pdl_max_tokens_);
  if (r != CUDA_SUCCESS) fail(" failed: " + cuda_error_text(*cu_, r));
}

std::vector<int64_t> GpuExecutor::distinct_routed_experts(const plan::Bucket& bucket, int64_t rows) {
  const plan::Plan& p = plan();
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  std::vector<int64_t> per_layer;
  for (size_t i = 0; i < bucket.launches.size(); ++i) {
    enqueue_launch(bucket, i);
    const plan::Launch& l = bucket.launches[i];
    const plan::Kernel& k = p.kernels[l.kernel];
    // The router's launch, or the experts' gate/up launch that routes the step itself (ROUTE > 0,
    // compiler/passes/router_experts.h): both write the step's topk_ids.
    const int64_t top_k = k.constant("TOPK").value_or(0), route = k.constant("ROUTE").value_or(0);
    if (k.family != "moe_router" && !(k.family == "moe_grouped_gate_up" && route > 0)) continue;
    const size_t arg = k.param_index("topk_ids").value_or(k.param_names.size());
    if (top_k < 1 || arg >= l.args.size() || l.args[arg].kind != plan::ArgKind::Buffer)
      throw Error(source_ + ": invalid plan: router launch " + std::to_string(i) + " has no topk_ids buffer or TOPK");
    // The router's choices of this step's tokens, read back right after it ran (the slot is
    // scratch: a later layer's router reuses it).
    std::vector<int32_t> ids(static_cast<size_t>(rows * top_k));
    cuda_check(*cu_,
               cu_->cuMemcpyDtoHAsync(ids.data(), arena_ + p.buffers.slots[l.args[arg].index].offset + l.args[arg].offset,
                                      ids.size() * 4, stream),
               source_ + ": reading a router's choices");
    synchronize(source_ + ": reading a router's choices");
    std::sort(ids.begin(), ids.end());
    per_layer.push_back(std::unique(ids.begin(), ids.end()) - ids.begin());
  }
  synchronize(source_ + ": step of bucket " + bucket.program + "/" + std::to_string(bucket.tokens) + " failed");
  return per_layer;
}

void* GpuExecutor::capture(std::span<const plan::Bucket* const> chain, size_t launch_limit) {
  CUstream stream = static_cast<CUstream>(stream_);
  std::string what = source_ + ": building the CUDA graph of bucket";
  for (const plan::Bucket* b : chain) what += " " + b->program + "/" + std::to_string(b->tokens);
  cuda_check(*cu_, cu_->cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), what);
  try {
    size_t left = launch_limit;
    for (const plan::Bucket* b : chain)
      for (size_t i = 0; i < b->launches.size() && left > 0; ++i, --left) enqueue_launch(*b, i);
  } catch (...) {
    CUgraph g = nullptr;
    cu_->cuStreamEndCapture(stream, &g);
    if (g) cu_->cuGraphDestroy(g);
    throw;
  }
  CUgraph graph = nullptr;
  cuda_check(*cu_, cu_->cuStreamEndCapture(stream, &graph), what);
  CUgraphExec exec = nullptr;
  CUresult r = cu_->cuGraphInstantiate(&exec, graph, 0);
  cu_->cuGraphDestroy(graph);
  cuda_check(*cu_, r, what);
  return exec;
}

void GpuExecutor::build_graphs() {
  const plan::Plan& p = plan();
  graphs_.assign(p.buckets.size(), nullptr);
  for (size_t b = 0; b < p.buckets.size(); ++b) {
    const plan::Bucket* one[] = {&p.buckets[b]};
    graphs_[b] = capture(one);
  }
}

void* GpuExecutor::chain_graph(std::span<const plan::Bucket* const> chain) {
  std::vector<size_t> key;
  for (const plan::Bucket* b : chain) key.push_back(bucket_index(*b));
  auto it = chain_graphs_.find(key);
  if (it == chain_graphs_.end()) {
    model_->make_current();
    it = chain_graphs_.emplace(key, capture(chain)).first;
  }
  return it->second;
}

void GpuExecutor::prepare_chain(std::span<const plan::Bucket* const> chain) {
  if (use_graphs_ && chain.size() > 1) chain_graph(chain);
}

void GpuExecutor::run_chain(std::span<const plan::Bucket* const> chain, const StepInputs& in, bool wait) {
  if (chain.empty()) return;
  if (chain.size() == 1) return run(*chain[0], in, wait);
  model_->make_current();
  write_inputs(in);
  CUstream stream = static_cast<CUstream>(stream_);
  if (use_graphs_) {
    cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(chain_graph(chain)), stream), source_ + ": graph launch");
  } else {
    for (const plan::Bucket* b : chain) enqueue(*b);
  }
  ++in_flight_;
  if (wait) synchronize(source_ + ": step of bucket " + chain[0]->program + "/" + std::to_string(chain[0]->tokens) + " and its followers failed");
}

void GpuExecutor::launch_chain(std::span<const plan::Bucket* const> chain) {
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  if (use_graphs_)
    cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(chain_graph(chain)), stream), source_ + ": graph launch");
  else
    for (const plan::Bucket* b : chain) enqueue(*b);
}

void GpuExecutor::write_slot(uint32_t slot, uint64_t offset, const void* src, size_t bytes, bool wait) {
  const plan::Plan& p = plan();
  if (slot >= p.buffers.slots.size() || offset + bytes > p.buffers.slots[slot].size || bytes > input_stage_bytes_)
    throw Error(source_ + ": a write of " + std::to_string(bytes) + " bytes does not fit slot " + std::to_string(slot));
  model_->make_current();
  // A staging area no queued copy still reads (the inputs' ring, as write_inputs takes it).
  if (wait || in_flight_ >= kInputStages - 1) synchronize(source_ + ": a queued step failed");
  uint8_t* stage = pinned_ + input_stage_bytes_ * static_cast<uint64_t>(next_stage_);
  next_stage_ = (next_stage_ + 1) % kInputStages;
  std::memcpy(stage, src, bytes);
  CUstream stream = static_cast<CUstream>(stream_);
  cuda_check(*cu_, cu_->cuMemcpyHtoDAsync(arena_ + p.buffers.slots[slot].offset + offset, stage, bytes, stream),
             source_ + ": writing a slot");
  ++in_flight_;
  if (wait) synchronize(source_ + ": writing a slot");
}

size_t GpuExecutor::bucket_index(const plan::Bucket& bucket) const {
  const plan::Plan& p = plan();
  size_t b = static_cast<size_t>(&bucket - p.buckets.data());
  if (b >= p.buckets.size()) throw Error("internal: bucket does not belong to this plan");
  return b;
}

void GpuExecutor::write_inputs(const StepInputs& in) {
  const plan::Plan& p = plan();
  CUstream stream = static_cast<CUstream>(stream_);
  if (in_flight_ >= kInputStages - 1) {  // every other area may still be read by a queued copy
    synchronize(source_ + ": a queued step failed");
  }
  uint8_t* stage = pinned_ + input_stage_bytes_ * static_cast<uint64_t>(next_stage_);
  next_stage_ = (next_stage_ + 1) % kInputStages;
  const bool one_copy = !inputs_image_.empty();
  uint64_t at = 0;
  for (const plan::StepInputBinding& s : p.step_inputs) {
    const plan::BufferSlot& slot = p.buffers.slots[s.slot];
    const void* src = nullptr;
    size_t n = 0;
    switch (s.kind) {
      case plan::StepInputKind::Tokens: src = in.tokens.data(); n = in.tokens.size() * 4; break;
      case plan::StepInputKind::Positions: src = in.positions.data(); n = in.positions.size() * 4; break;
      case plan::StepInputKind::TreeMask: src = in.tree_mask.data(); n = in.tree_mask.size() * 4; break;
      case plan::StepInputKind::CacheLength: src = &in.cache_length; n = 4; break;
      case plan::StepInputKind::TokenCount: src = &in.token_count; n = 4; break;
    }
    if (n > slot.size)
      throw Error(source_ + ": step input " + plan::step_input_name(s.kind) + " of " + std::to_string(n) +
                  " bytes does not fit its " + std::to_string(slot.size) + "-byte slot");
    if (n == 0) continue;
    if (one_copy) {
      std::memcpy(inputs_image_.data() + (slot.offset - inputs_begin_), src, n);
      continue;
    }
    std::memcpy(stage + at, src, n);
    cuda_check(*cu_, cu_->cuMemcpyHtoDAsync(arena_ + slot.offset, stage + at, n, stream), "writing step inputs");
    at += align_up(slot.size, 64);
  }
  if (!one_copy) return;
  std::memcpy(stage, inputs_image_.data(), inputs_image_.size());
  cuda_check(*cu_, cu_->cuMemcpyHtoDAsync(arena_ + inputs_begin_, stage, inputs_image_.size(), stream),
             "writing step inputs");
}

void GpuExecutor::launch(const plan::Bucket& bucket) {
  CUstream stream = static_cast<CUstream>(stream_);
  if (use_graphs_)
    cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(graphs_[bucket_index(bucket)]), stream),
               source_ + ": graph launch");
  else
    enqueue(bucket);
}

void GpuExecutor::run(const plan::Bucket& bucket, const StepInputs& in, bool wait) {
  model_->make_current();
  write_inputs(in);
  launch(bucket);
  ++in_flight_;
  if (!wait) return;
  synchronize(source_ + ": step of bucket " + bucket.program + "/" + std::to_string(bucket.tokens) + " failed");
}

void GpuExecutor::synchronize(const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  cuda_check(*cu_, cu_->cuStreamSynchronize(static_cast<CUstream>(stream_)), what);
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  in_flight_ = 0;
}

void GpuExecutor::stage_output(const plan::StepOutput& out, int64_t rows, uint8_t** stage, size_t* count) {
  const plan::Plan& p = plan();
  rows = std::min(rows, out.rows);
  size_t elem = dtype_size(out.dtype);
  *count = static_cast<size_t>(rows * out.cols);
  uint64_t stage_at = pinned_bytes_ - align_up(*count * elem, 64);  // outputs staged at the end
  *stage = pinned_ + stage_at;
  CUstream stream = static_cast<CUstream>(stream_);
  cuda_check(*cu_,
             cu_->cuMemcpyDtoHAsync(*stage, arena_ + p.buffers.slots[out.slot].offset + out.offset, *count * elem,
                                    stream),
             source_ + ": reading a step output");
  synchronize(source_ + ": reading a step output");
}

void GpuExecutor::read_raw(std::span<const RawRead> reads) {
  const plan::Plan& p = plan();
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  uint64_t stage_at = input_stage_bytes_ * kInputStages;  // the outputs' area, after the inputs'
  std::vector<std::pair<uint8_t*, size_t>> staged;
  for (const RawRead& r : reads) {
    if (dtype_size(r.out->dtype) != 4) throw Error(source_ + ": output " + plan::output_kind_name(r.out->kind) + " is not 4-byte");
    const size_t bytes = static_cast<size_t>(std::min(r.rows, r.out->rows) * r.out->cols) * 4;
    if (stage_at + bytes > pinned_bytes_) throw Error(source_ + ": outputs read together exceed the staging area");
    cuda_check(*cu_,
               cu_->cuMemcpyDtoHAsync(pinned_ + stage_at, arena_ + p.buffers.slots[r.out->slot].offset + r.out->offset,
                                      bytes, stream),
               source_ + ": reading a step output");
    staged.emplace_back(pinned_ + stage_at, bytes);
    stage_at += align_up(bytes, 64);
  }
  synchronize(source_ + ": reading step outputs");
  for (size_t i = 0; i < reads.size(); ++i) std::memcpy(reads[i].dst, staged[i].first, staged[i].second);
}

void GpuExecutor::read_output(const plan::StepOutput& out, int64_t rows, float* dst) {
  model_->make_current();
  uint8_t* stage = nullptr;
  size_t count = 0;
  stage_output(out, rows, &stage, &count);
  switch (out.dtype) {
    case DType::F32: std::memcpy(dst, stage, count * 4); break;
    case DType::BF16:
    case DType::F16: {
      const uint16_t* h = reinterpret_cast<const uint16_t*>(stage);
      for (size_t i = 0; i < count; ++i) dst[i] = out.dtype == DType::BF16 ? bf16_to_float(h[i]) : f16_to_float(h[i]);
      break;
    }
    case DType::I32: {
      const int32_t* v = reinterpret_cast<const int32_t*>(stage);
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<float>(v[i]);
      break;
    }
    default: throw Error(source_ + ": step output of dtype " + std::string(dtype_name(out.dtype)) + " is not readable");
  }
}

void GpuExecutor::read_ids(const plan::StepOutput& out, int64_t rows, int32_t* dst) {
  if (out.cols != 1) throw Error(source_ + ": invalid plan: a token-ids output must be i32 with one column per token");
  read_i32(out, rows, dst);
}

void GpuExecutor::read_i32(const plan::StepOutput& out, int64_t rows, int32_t* dst) {
  if (out.dtype != DType::I32) throw Error(source_ + ": invalid plan: output " + plan::output_kind_name(out.kind) + " is not i32");
  model_->make_current();
  uint8_t* stage = nullptr;
  size_t count = 0;
  stage_output(out, rows, &stage, &count);
  std::memcpy(dst, stage, count * 4);
}

void GpuExecutor::commit_kv(int64_t cache_length, std::span<const int32_t> keep, const plan::Bucket* follower) {
  const plan::Plan& p = plan();
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  // A prefix kept in place (prefill, AR, a chain accepted whole) moves nothing.
  const std::vector<RowMove> moves = kv_row_moves(cache_length, keep);
  if (moves.empty()) return;
  if (const plan::Bucket* commit = p.bucket_for("target_commit", static_cast<int64_t>(keep.size()))) {
    // The lowered kv_compact launches, replayed like any bucket: kept indices as its tokens.
    StepInputs in;
    in.tokens.assign(commit->tokens, 0);
    std::copy(keep.begin(), keep.end(), in.tokens.begin());
    in.cache_length = static_cast<int32_t>(cache_length);
    in.token_count = static_cast<int32_t>(keep.size());
    const plan::Bucket* chain[] = {commit, follower};
    // The next step, on the same stream, runs after it.
    run_chain(std::span<const plan::Bucket* const>(chain, follower ? 2 : 1), in, /*wait=*/false);
    return;
  }
  for (const plan::KvCache& kv : p.kv_caches) {
    // The drafter's context caches commit with @draft_commit, on the drafter's own rows.
    if (kv.name.rfind("dk.", 0) == 0 || kv.name.rfind("dv.", 0) == 0) continue;
    uint64_t base = arena_ + p.buffers.slots[kv.slot].offset;
    for (const RowMove& m : moves) {
      if (static_cast<uint64_t>(m.from + m.rows) > kv.rows)
        throw Error(source_ + ": KV row move outside cache " + kv.name);
      cuda_check(*cu_,
                 cu_->cuMemcpyDtoDAsync(base + static_cast<uint64_t>(m.to) * kv.row_bytes,
                                        base + static_cast<uint64_t>(m.from) * kv.row_bytes,
                                        static_cast<uint64_t>(m.rows) * kv.row_bytes, stream),
                 source_ + ": compacting KV cache " + kv.name);
    }
  }
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream), source_ + ": compacting the KV caches");
}

std::vector<float> GpuExecutor::time_replays(const std::function<void()>& replay, int warmup, int reps) {
  CUstream stream = static_cast<CUstream>(stream_);
  for (int i = 0; i < warmup; ++i) replay();
  std::vector<CUevent> events(static_cast<size_t>(reps) + 1, nullptr);
  for (CUevent& e : events) cuda_check(*cu_, cu_->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  cuda_check(*cu_, cu_->cuEventRecord(events[0], stream), "cuEventRecord");
  for (int i = 0; i < reps; ++i) {
    replay();
    cuda_check(*cu_, cu_->cuEventRecord(events[static_cast<size_t>(i) + 1], stream), "cuEventRecord");
  }
  CUresult sync = cu_->cuEventSynchronize(events.back());
  std::vector<float> ms(static_cast<size_t>(reps), 0.0f);
  for (int i = 0; i < reps && sync == CUDA_SUCCESS; ++i)
    cu_->cuEventElapsedTime(&ms[static_cast<size_t>(i)], events[static_cast<size_t>(i)],
                            events[static_cast<size_t>(i) + 1]);
  for (CUevent e : events) cu_->cuEventDestroy(e);
  cuda_check(*cu_, sync, source_ + ": timed replays failed");
  return ms;
}

std::vector<float> GpuExecutor::time_bucket(const plan::Bucket& bucket, int warmup, int reps) {
  model_->make_current();
  return time_replays([&] { launch(bucket); }, warmup, reps);
}

std::vector<float> GpuExecutor::time_graph_prefixes(const plan::Bucket& bucket, int reps) {
  if (reps <= 0) throw Error("time_graph_prefixes: reps must be positive");
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  const plan::Bucket* one[] = {&bucket};
  const size_t n = bucket.launches.size();
  std::vector<float> median(n + 1, 0.0f);
  for (size_t k = 1; k <= n; ++k) {
    const std::unique_ptr<void, std::function<void(void*)>> graph(
        capture(one, k), [&](void* g) { cu_->cuGraphExecDestroy(static_cast<CUgraphExec>(g)); });
    std::vector<float> ms = time_replays(
        [&] { cuda_check(*cu_, cu_->cuGraphLaunch(static_cast<CUgraphExec>(graph.get()), stream), source_ + ": graph launch"); }, 3, reps);
    std::sort(ms.begin(), ms.end());
    median[k] = ms[ms.size() / 2];
  }
  std::vector<float> marginal(n, 0.0f);
  for (size_t i = 0; i < n; ++i) marginal[i] = median[i + 1] - median[i];
  return marginal;
}

std::vector<float> GpuExecutor::time_launches(const plan::Bucket& bucket, int reps) {
  if (reps <= 0) throw Error("time_launches: reps must be positive");
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  const size_t n = bucket.launches.size();
  for (size_t i = 0; i < n; ++i) enqueue_launch(bucket, i);  // warm-up: modules, clocks, TLBs
  std::vector<CUevent> events(n + 1, nullptr);
  for (CUevent& e : events) cuda_check(*cu_, cu_->cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<std::vector<float>> ms(n, std::vector<float>(static_cast<size_t>(reps), 0.0f));
  CUresult status = CUDA_SUCCESS;
  for (int r = 0; r < reps && status == CUDA_SUCCESS; ++r) {
    status = cu_->cuEventRecord(events[0], stream);
    for (size_t i = 0; i < n && status == CUDA_SUCCESS; ++i) {
      enqueue_launch(bucket, i);
      status = cu_->cuEventRecord(events[i + 1], stream);
    }
    if (status == CUDA_SUCCESS) status = cu_->cuEventSynchronize(events[n]);
    for (size_t i = 0; i < n && status == CUDA_SUCCESS; ++i)
      status = cu_->cuEventElapsedTime(&ms[i][static_cast<size_t>(r)], events[i], events[i + 1]);
  }
  for (CUevent e : events) cu_->cuEventDestroy(e);
  cuda_check(*cu_, status, source_ + ": timed launches failed");
  std::vector<float> median(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    std::sort(ms[i].begin(), ms[i].end());
    median[i] = ms[i][ms[i].size() / 2];
  }
  return median;
}

void GpuExecutor::clear_arena() {
  model_->make_current();
  CUstream stream = static_cast<CUstream>(stream_);
  cuda_check(*cu_, cu_->cuMemsetD8Async(arena_, 0, arena_bytes_, stream), "clearing the arena");
  cuda_check(*cu_, cu_->cuStreamSynchronize(stream), "clearing the arena");
}

}  // namespace kplan::gpu
