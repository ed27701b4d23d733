#include "schemas/plan_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "ir/support/checksum.h"

#include "schemas/plan_file_format.h"
#include "ir/support/error.h"
#include "ir/support/regular_file.h"
#include "schemas/kplan_generated.h"
#include "schemas/model_spec_table.h"

namespace kplan::plan {
namespace {

namespace fb = kplan::fb;

// A read-only mapping of a whole file, unmapped when the last owner lets go.
std::shared_ptr<const void> map_file(const std::filesystem::path& path, uint64_t* size_out) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) || ec) require_regular_file(path, "plan");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // never blocks on a FIFO swapped in
  if (fd < 0) throw Error(path.string() + ": cannot open plan: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(path.string() + ": cannot stat plan: " + std::strerror(e));
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  *size_out = size;
  if (size == 0) {
    ::close(fd);
    throw Error(path.string() + ": damaged plan: the file is empty");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error(path.string() + ": cannot map plan: " + std::strerror(e));
  return std::shared_ptr<const void>(p, [size](const void* q) { ::munmap(const_cast<void*>(q), size); });
}

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <typename T>
std::vector<T> vec(const flatbuffers::Vector<T>* v) {
  return v ? std::vector<T>(v->begin(), v->end()) : std::vector<T>();
}

Header read_header(const fb::Header* h) {
  Header out;
  if (!h) return out;
  out.format_version = h->format_version();
  out.compiler_version = str(h->compiler_version());
  out.cuda_version = str(h->cuda_version());
  out.nvrtc_version = str(h->nvrtc_version());
  if (h->archs())
    for (const auto* a : *h->archs()) out.archs.push_back(a->str());
  if (const fb::Limits* l = h->limits()) {
    out.limits.max_tokens_per_step = l->max_tokens_per_step();
    out.limits.max_tree_nodes = l->max_tree_nodes();
    out.limits.max_context = l->max_context();
  }
  return out;
}

Kernel read_kernel(const fb::Kernel* k) {
  Kernel out;
  out.id = str(k->id());
  out.entry = str(k->entry());
  out.family = str(k->family());
  out.cache_key = str(k->cache_key());
  if (k->constants())
    for (const auto* c : *k->constants()) out.constants.push_back({str(c->name()), c->value()});
  if (k->params())
    for (auto p : *k->params()) out.params.push_back(static_cast<ParamType>(p));
  if (k->param_names())
    for (const auto* n : *k->param_names()) out.param_names.push_back(n->str());
  if (k->binaries())
    for (const auto* b : *k->binaries()) out.binaries.push_back({str(b->arch()), vec(b->cubin())});
  out.library = str(k->library());
  return out;
}

Launch read_launch(const fb::Launch* l) {
  Launch out;
  out.kernel = l->kernel();
  if (const fb::Dim3* g = l->grid()) out.grid = {g->x(), g->y(), g->z()};
  if (const fb::Dim3* b = l->block()) out.block = {b->x(), b->y(), b->z()};
  out.smem_bytes = l->smem_bytes();
  if (l->args())
    for (const fb::LaunchArg* a : *l->args())
      out.args.push_back({static_cast<ArgKind>(a->kind()), a->index(), a->offset(), a->ival(), a->fval()});
  out.note = str(l->note());
  if (const fb::Dim3* c = l->cluster()) out.cluster = {c->x(), c->y(), c->z()};
  out.grid_x_per_sm = l->grid_x_per_sm();
  if (l->tensor_maps())
    for (const fb::TensorMap* t : *l->tensor_maps()) {
      TensorMapDesc d;
      d.base = static_cast<ArgKind>(t->base());
      d.index = t->index();
      d.offset = t->offset();
      d.dtype = static_cast<DType>(t->dtype());
      if (t->dims()) d.dims.assign(t->dims()->begin(), t->dims()->end());
      if (t->strides()) d.strides.assign(t->strides()->begin(), t->strides()->end());
      if (t->box()) d.box.assign(t->box()->begin(), t->box()->end());
      d.swizzle = static_cast<TensorMapSwizzle>(t->swizzle());
      out.tensor_maps.push_back(std::move(d));
    }
  return out;
}

Bucket read_bucket(const fb::Bucket* b) {
  Bucket out;
  out.program = str(b->program());
  out.tokens = b->tokens();
  if (b->launches())
    for (const auto* l : *b->launches()) out.launches.push_back(read_launch(l));
  if (b->outputs())
    for (const auto* o : *b->outputs())
      out.outputs.push_back({static_cast<OutputKind>(o->kind()), o->layer(), o->slot(), o->offset(),
                             static_cast<DType>(o->dtype()), o->rows(), o->cols()});
  return out;
}

// FlatBuffers 2.0.8's verifier checks that a vector's length field is 4-byte aligned, not that
// 8-byte elements are 8-byte aligned: a crafted plan can place a [long] or a [LaunchArg] at 4 mod 8,
// and reading it is a misaligned load (undefined behaviour; found by tests/fuzz plan_reader). The
// FlatBuffers builder aligns every vector to its elements, so such a plan is refused.
template <typename V>
void require_aligned(const V* v, const std::string& src, const std::string& what) {
  if (v && reinterpret_cast<uintptr_t>(v->Data()) % 8 != 0)
    throw Error(src + ": damaged plan: " + what + " is not 8-byte aligned in the metadata");
}

void check_vector_alignment(const fb::Plan* root, const std::string& src) {
  require_aligned(root->model()->eos_token_ids(), src, "the model spec's eos_token_ids");
  if (root->draft()) require_aligned(root->draft()->target_layer_ids(), src, "the drafter spec's target_layer_ids");
  if (root->weights())
    for (const fb::Weight* w : *root->weights())
      require_aligned(w->shape(), src, "the shape of weight " + str(w->name()));
  if (root->buckets())
    for (const fb::Bucket* b : *root->buckets()) {
      if (!b->launches()) continue;
      for (const fb::Launch* l : *b->launches()) {
        require_aligned(l->args(), src, "a launch's arguments in bucket " + str(b->program()));
        if (l->tensor_maps())
          for (const fb::TensorMap* t : *l->tensor_maps()) {
            require_aligned(t->dims(), src, "a tensor map's dims in bucket " + str(b->program()));
            require_aligned(t->strides(), src, "a tensor map's strides in bucket " + str(b->program()));
          }
      }
    }
}

// Enum values the verifier does not check (FlatBuffers stores them as plain bytes).
void check_enums(const Plan& p, const std::string& src) {
  auto bad = [&](const std::string& what) { throw Error(src + ": damaged plan: unknown " + what); };
  for (const Kernel& k : p.kernels)
    for (ParamType t : k.params)
      if (static_cast<int>(t) > static_cast<int>(ParamType::TensorMap)) bad("parameter type in kernel " + k.id);
  for (const Weight& w : p.weights)
    if (static_cast<int>(w.dtype) > static_cast<int>(DType::BOOL)) bad("dtype of weight " + w.name);
  for (const BufferSlot& s : p.buffers.slots)
    if (static_cast<int>(s.role) > static_cast<int>(SlotRole::Output)) bad("role of slot " + s.name);
  for (const Bucket& b : p.buckets) {
    for (const Launch& l : b.launches) {
      for (const LaunchArg& a : l.args)
        if (static_cast<int>(a.kind) > static_cast<int>(ArgKind::TensorMap)) bad("launch argument kind");
      for (const TensorMapDesc& t : l.tensor_maps)
        if (static_cast<int>(t.base) > static_cast<int>(ArgKind::TensorMap) ||
            static_cast<int>(t.dtype) > static_cast<int>(DType::BOOL) ||
            static_cast<int>(t.swizzle) > static_cast<int>(TensorMapSwizzle::B128))
          bad("tensor map base, dtype or swizzle");
    }
    for (const StepOutput& o : b.outputs)
      if (static_cast<int>(o.kind) > static_cast<int>(OutputKind::RoundState) ||
          static_cast<int>(o.dtype) > static_cast<int>(DType::BOOL))
        bad("step output kind or dtype");
  }
}

}  // namespace

Plan read_plan(const std::filesystem::path& path, const ReadOptions& options) {
  const std::string src = path.string();
  uint64_t file_size = 0;
  std::shared_ptr<const void> mapping = map_file(path, &file_size);
  const uint8_t* base = static_cast<const uint8_t*>(mapping.get());

  if (file_size < 8 || std::memcmp(base, kMagic, 4) != 0)
    throw Error(src + ": not a kplan plan (the file does not start with \"KPLN\")");
  FilePrefix prefix{};
  uint32_t version = 0;
  std::memcpy(&version, base + 4, 4);
  if (version > kFormatVersion)
    throw Error(src + ": plan format version " + std::to_string(version) +
                " is newer than this runtime reads (" + std::to_string(kFormatVersion) +
                "): update kplan or recompile the plan with this version");
  if (file_size < kPrefixSize)
    throw Error(src + ": damaged plan: truncated (" + std::to_string(file_size) +
                " bytes, shorter than the 64-byte header)");
  std::memcpy(&prefix, base, sizeof prefix);
  if (checksum64(&prefix, offsetof(FilePrefix, prefix_checksum)) != prefix.prefix_checksum)
    throw Error(src + ": damaged plan: header checksum mismatch");
  if (version != kFormatVersion)
    throw Error(src + ": plan format version " + std::to_string(version) +
                " is older than this runtime reads (" + std::to_string(kFormatVersion) +
                "): recompile the plan");
  // Every size below is compared without a sum that could wrap past 2^64 (the header is untrusted:
  // a crafted file carries a valid header checksum).
  if (prefix.flatbuffer_size > file_size - kPrefixSize)
    throw Error(src + ": damaged plan: the metadata size (" + std::to_string(prefix.flatbuffer_size) +
                " bytes) runs past the end of the file (" + std::to_string(file_size) + " bytes)");
  if (prefix.data_offset < kPrefixSize + prefix.flatbuffer_size || prefix.data_offset % kDataAlignment)
    throw Error(src + ": damaged plan: the data section offset is inconsistent");
  uint64_t expected = 0;
  if (__builtin_add_overflow(prefix.data_offset, prefix.data_size, &expected))
    throw Error(src + ": damaged plan: truncated (" + std::to_string(file_size) + " bytes, the header's data offset " +
                std::to_string(prefix.data_offset) + " + size " + std::to_string(prefix.data_size) + " wraps past 2^64)");
  if (file_size < expected)
    throw Error(src + ": damaged plan: truncated (" + std::to_string(file_size) + " bytes, the header says " +
                std::to_string(expected) + ")");

  const uint8_t* fb_bytes = base + kPrefixSize;
  if (checksum64(fb_bytes, prefix.flatbuffer_size) != prefix.flatbuffer_checksum)
    throw Error(src + ": damaged plan: metadata checksum mismatch");
  flatbuffers::Verifier::Options vopts;
  vopts.max_tables = 1u << 30;
  vopts.max_depth = 64;
  flatbuffers::Verifier verifier(fb_bytes, prefix.flatbuffer_size, vopts);
  if (!fb::VerifyPlanBuffer(verifier))
    throw Error(src + ": damaged plan: the metadata fails FlatBuffer verification");
  const fb::Plan* root = fb::GetPlan(fb_bytes);

  Plan plan;
  plan.header = read_header(root->header());
  if (plan.header.format_version != version)
    throw Error(src + ": damaged plan: the metadata's format version " +
                std::to_string(plan.header.format_version) + " differs from the file header's " +
                std::to_string(version));
  if (!root->model())
    throw Error(src + ": damaged plan: the metadata has no model spec");
  check_vector_alignment(root, src);
  plan.model = read_model_spec(*root->model());
  if (root->draft()) plan.draft = read_draft_spec(*root->draft());
  plan.model_config_json = str(root->model_config_json());
  plan.draft_config_json = str(root->draft_config_json());
  plan.tokenizer = vec(root->tokenizer());
  plan.ir_text = str(root->ir_text());
  if (root->kernels())
    for (const auto* k : *root->kernels()) plan.kernels.push_back(read_kernel(k));

  const uint8_t* data = base + prefix.data_offset;
  // Progress over the bytes to hash (the entries' sizes, capped at the data section's: they are
  // checked one by one below).
  uint64_t verify_total = 0, verified = 0;
  const bool report = options.verify_weights && options.on_progress;
  if (report && root->weights()) {
    for (const fb::Weight* w : *root->weights())
      if (!w->synthetic()) verify_total += std::min<uint64_t>(w->size(), prefix.data_size);
    options.on_progress(0, verify_total);
  }
  if (root->weights()) {
    plan.weights.reserve(root->weights()->size());
    for (const fb::Weight* w : *root->weights()) {
      Weight out;
      out.name = str(w->name());
      out.dtype = static_cast<DType>(w->dtype());
      out.shape = vec(w->shape());
      out.layout = str(w->layout());
      out.offset = w->offset();
      out.size = w->size();
      out.checksum = w->checksum();
      out.source = w->source() ? w->source()->str() : "target";
      if (const fb::SyntheticInit* s = w->synthetic()) {
        // Generated at load: nothing in the data section (validate_plan checks the entry).
        out.synthetic = SyntheticInit{s->seed(), s->stream(), static_cast<SyntheticKind>(s->kind()), s->mean(), s->stddev(),
                                      s->group_size(), s->kernel()};
        if (out.offset != 0 || out.checksum != 0)
          throw Error(src + ": damaged plan: synthetic weight " + out.name + " has a data offset or checksum");
        plan.weights.push_back(std::move(out));
        continue;
      }
      if (out.offset > prefix.data_size || out.size > prefix.data_size - out.offset)
        throw Error(src + ": damaged plan: weight " + out.name + " lies outside the data section");
      out.view = std::span<const uint8_t>(data + out.offset, out.size);
      if (options.verify_weights) {
        const uint64_t sum =
            report ? checksum64_chunked(out.view.data(), out.size, kVerifyChunkBytes,
                                        [&](size_t n) { options.on_progress(verified += n, verify_total); })
                   : checksum64(out.view.data(), out.size);
        if (sum != out.checksum) throw Error(src + ": damaged plan: checksum mismatch in weight " + out.name);
      }
      plan.weights.push_back(std::move(out));
    }
  }
  if (const fb::BufferPlan* bp = root->buffers()) {
    plan.buffers.arena_size = bp->arena_size();
    if (bp->slots())
      for (const auto* s : *bp->slots())
        plan.buffers.slots.push_back({str(s->name()), static_cast<SlotRole>(s->role()), s->offset(),
                                      s->size(), s->alignment()});
  }
  if (root->step_inputs())
    for (const fb::StepInputBinding* s : *root->step_inputs())
      plan.step_inputs.push_back({static_cast<StepInputKind>(s->kind()), s->slot()});
  if (root->kv_caches())
    for (const auto* kv : *root->kv_caches())
      plan.kv_caches.push_back({str(kv->name()), kv->slot(), kv->row_bytes(), kv->rows()});
  if (root->buckets())
    for (const auto* b : *root->buckets()) plan.buckets.push_back(read_bucket(b));
  plan.backing = std::move(mapping);

  check_enums(plan, src);
  validate_plan(plan, src);
  return plan;
}

}  // namespace kplan::plan
