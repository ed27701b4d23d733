#include "schemas/plan_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ir/support/checksum.h"

#include "schemas/plan_file_format.h"
#include "ir/support/error.h"
#include "schemas/kplan_generated.h"
#include "schemas/model_spec_table.h"

namespace kplan::plan {
namespace {

namespace fb = kplan::fb;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

Offset<fb::Header> build_header(FlatBufferBuilder& b, const Header& h) {
  auto limits = fb::CreateLimits(b, h.limits.max_tokens_per_step, h.limits.max_tree_nodes,
                                 h.limits.max_context);
  return fb::CreateHeader(b, h.format_version, b.CreateString(h.compiler_version),
                          b.CreateString(h.cuda_version), b.CreateString(h.nvrtc_version),
                          b.CreateVectorOfStrings(h.archs), limits);
}

Offset<fb::Kernel> build_kernel(FlatBufferBuilder& b, const Kernel& k) {
  std::vector<Offset<fb::KernelConstant>> constants;
  for (const KernelConstant& c : k.constants)
    constants.push_back(fb::CreateKernelConstant(b, b.CreateString(c.name), c.value));
  std::vector<uint8_t> params;
  for (ParamType p : k.params) params.push_back(static_cast<uint8_t>(p));
  std::vector<Offset<fb::KernelBinary>> binaries;
  for (const KernelBinary& bin : k.binaries)
    binaries.push_back(fb::CreateKernelBinary(b, b.CreateString(bin.arch), b.CreateVector(bin.cubin)));
  auto params_vec = b.CreateVector(reinterpret_cast<const fb::ParamType*>(params.data()), params.size());
  return fb::CreateKernel(b, b.CreateString(k.id), b.CreateString(k.entry), b.CreateString(k.family),
                          b.CreateString(k.cache_key), b.CreateVector(constants), params_vec,
                          b.CreateVectorOfStrings(k.param_names), b.CreateVector(binaries),
                          k.library.empty() ? 0 : b.CreateString(k.library));
}

Offset<fb::Launch> build_launch(FlatBufferBuilder& b, const Launch& l) {
  std::vector<fb::LaunchArg> args;
  for (const LaunchArg& a : l.args)
    args.emplace_back(static_cast<fb::ArgKind>(a.kind), a.index, a.offset, a.ival, a.fval);
  fb::Dim3 grid(l.grid[0], l.grid[1], l.grid[2]);
  fb::Dim3 block(l.block[0], l.block[1], l.block[2]);
  fb::Dim3 cluster(l.cluster[0], l.cluster[1], l.cluster[2]);
  std::vector<Offset<fb::TensorMap>> maps;
  for (const TensorMapDesc& t : l.tensor_maps)
    maps.push_back(fb::CreateTensorMap(b, static_cast<fb::ArgKind>(t.base), t.index, t.offset,
                                       static_cast<fb::DType>(t.dtype), b.CreateVector(t.dims),
                                       b.CreateVector(t.strides), b.CreateVector(t.box),
                                       static_cast<fb::TensorMapSwizzle>(t.swizzle)));
  // Plans without clusters or tensor maps keep the fields absent (smaller, and byte-identical
  // to what they were).
  const bool plain_cluster = l.cluster == std::array<uint32_t, 3>{1, 1, 1};
  return fb::CreateLaunch(b, l.kernel, &grid, &block, l.smem_bytes, b.CreateVectorOfStructs(args),
                          b.CreateString(l.note), plain_cluster ? nullptr : &cluster, l.grid_x_per_sm,
                          maps.empty() ? 0 : b.CreateVector(maps));
}

Offset<fb::Bucket> build_bucket(FlatBufferBuilder& b, const Bucket& bucket) {
  std::vector<Offset<fb::Launch>> launches;
  for (const Launch& l : bucket.launches) launches.push_back(build_launch(b, l));
  std::vector<Offset<fb::StepOutput>> outputs;
  for (const StepOutput& o : bucket.outputs)
    outputs.push_back(fb::CreateStepOutput(b, static_cast<fb::OutputKind>(o.kind), o.layer, o.slot,
                                           o.offset, static_cast<fb::DType>(o.dtype), o.rows, o.cols));
  return fb::CreateBucket(b, b.CreateString(bucket.program), bucket.tokens, b.CreateVector(launches),
                          b.CreateVector(outputs));
}

void build_plan(FlatBufferBuilder& b, const Plan& p) {
  auto header = build_header(b, p.header);
  std::vector<Offset<fb::Kernel>> kernels;
  for (const Kernel& k : p.kernels) kernels.push_back(build_kernel(b, k));
  std::vector<Offset<fb::Weight>> weights;
  for (const Weight& w : p.weights) {
    Offset<fb::SyntheticInit> synthetic = 0;
    if (w.synthetic) {
      const SyntheticInit& s = *w.synthetic;
      synthetic = fb::CreateSyntheticInit(b, s.seed, s.stream, static_cast<fb::SyntheticKind>(s.kind), s.mean, s.stddev,
                                          s.group_size, s.kernel);
    }
    weights.push_back(fb::CreateWeight(b, b.CreateString(w.name), static_cast<fb::DType>(w.dtype),
                                       b.CreateVector(w.shape), b.CreateString(w.layout), w.offset,
                                       w.size, w.checksum, w.source == "target" ? 0 : b.CreateString(w.source), synthetic));
  }
  std::vector<Offset<fb::BufferSlot>> slots;
  for (const BufferSlot& s : p.buffers.slots)
    slots.push_back(fb::CreateBufferSlot(b, b.CreateString(s.name), static_cast<fb::SlotRole>(s.role),
                                         s.offset, s.size, s.alignment));
  auto buffers = fb::CreateBufferPlan(b, p.buffers.arena_size, b.CreateVector(slots));
  std::vector<fb::StepInputBinding> inputs;
  for (const StepInputBinding& s : p.step_inputs)
    inputs.emplace_back(static_cast<fb::StepInputKind>(s.kind), s.slot);
  std::vector<Offset<fb::KvCache>> kvs;
  for (const KvCache& kv : p.kv_caches)
    kvs.push_back(fb::CreateKvCache(b, b.CreateString(kv.name), kv.slot, kv.row_bytes, kv.rows));
  std::vector<Offset<fb::Bucket>> buckets;
  for (const Bucket& bucket : p.buckets) buckets.push_back(build_bucket(b, bucket));
  auto root = fb::CreatePlan(b, header, b.CreateString(p.model_config_json),
                             b.CreateString(p.draft_config_json), b.CreateVector(p.tokenizer),
                             b.CreateString(p.ir_text), b.CreateVector(kernels), b.CreateVector(weights),
                             buffers, b.CreateVectorOfStructs(inputs), b.CreateVector(kvs),
                             b.CreateVector(buckets), build_model_spec(b, p.model),
                             p.draft ? build_draft_spec(b, *p.draft) : 0);
  fb::FinishPlanBuffer(b, root);
}

// A FILE* that reports write errors with the file name.
class OutFile {
 public:
  OutFile(const std::filesystem::path& path) : path_(path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) throw Error(path.string() + ": cannot create plan file: " + std::strerror(errno));
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 22);
  }
  ~OutFile() {
    if (f_) std::fclose(f_);
  }
  void write(const void* data, size_t n) {
    if (n && std::fwrite(data, 1, n, f_) != n)
      throw Error(path_.string() + ": write failed: " + std::strerror(errno));
    pos_ += n;
  }
  void pad_to(uint64_t pos) {
    static const char zeros[4096] = {};
    while (pos_ < pos) write(zeros, std::min<uint64_t>(sizeof zeros, pos - pos_));
  }
  void close() {
    int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) throw Error(path_.string() + ": write failed: " + std::strerror(errno));
  }
  uint64_t pos() const { return pos_; }

 private:
  std::filesystem::path path_;
  std::FILE* f_ = nullptr;
  uint64_t pos_ = 0;
};

}  // namespace

void write_plan(Plan& plan, const std::filesystem::path& path, const WriteProgress& on_progress) {
  plan.header.format_version = kFormatVersion;
  uint64_t data_size = 0;
  uint64_t weight_bytes = 0, done = 0;
  for (const Weight& w : plan.weights)
    if (!w.synthetic) weight_bytes += w.data().size();
  auto advance = [&](const char* step, size_t n) {
    done += n;
    on_progress(step, done, weight_bytes);
  };
  if (on_progress) on_progress("hashing", 0, weight_bytes);
  for (Weight& w : plan.weights) {
    if (w.synthetic) {  // generated at load: no bytes here; size is what it will hold
      w.offset = 0;
      w.size = dtype_size(w.dtype) * static_cast<uint64_t>(synthetic_units(w));
      w.checksum = 0;
      continue;
    }
    std::span<const uint8_t> bytes = w.data();
    w.offset = align_up(data_size, kWeightAlignment);
    w.size = bytes.size();
    w.checksum = on_progress ? checksum64_chunked(bytes.data(), bytes.size(), kWriteChunkBytes,
                                                  [&](size_t n) { advance("hashing", n); })
                             : checksum64(bytes.data(), bytes.size());
    data_size = w.offset + w.size;
  }
  validate_plan(plan, path.string());

  FlatBufferBuilder builder(1 << 20);
  build_plan(builder, plan);
  if (builder.GetSize() >= (uint64_t{1} << 31) - 1)
    throw Error(path.string() + ": plan metadata exceeds the FlatBuffer 2 GiB limit");

  FilePrefix prefix{};
  std::memcpy(prefix.magic, kMagic, 4);
  prefix.format_version = kFormatVersion;
  prefix.flatbuffer_size = builder.GetSize();
  prefix.data_offset = align_up(kPrefixSize + prefix.flatbuffer_size, kDataAlignment);
  prefix.data_size = data_size;
  prefix.flatbuffer_checksum = checksum64(builder.GetBufferPointer(), builder.GetSize());
  prefix.prefix_checksum = checksum64(&prefix, offsetof(FilePrefix, prefix_checksum));

  std::filesystem::path tmp = path;
  tmp += ".tmp";
  try {
    OutFile out(tmp);
    out.write(&prefix, sizeof prefix);
    out.write(builder.GetBufferPointer(), builder.GetSize());
    done = 0;
    if (on_progress) on_progress("writing", 0, weight_bytes);
    for (const Weight& w : plan.weights) {
      if (w.synthetic) continue;
      out.pad_to(prefix.data_offset + w.offset);
      const std::span<const uint8_t> bytes = w.data();
      for (size_t at = 0; at < bytes.size(); at += kWriteChunkBytes) {
        const size_t n = std::min(kWriteChunkBytes, bytes.size() - at);
        out.write(bytes.data() + at, n);
        if (on_progress) advance("writing", n);
      }
    }
    out.pad_to(prefix.data_offset + data_size);
    out.close();
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw Error(path.string() + ": cannot write plan file: " + ec.message());
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
}

}  // namespace kplan::plan
