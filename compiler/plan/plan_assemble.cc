#include "compiler/plan/plan_assemble.h"

#include <cuda.h>

#include <fstream>
#include <iterator>

#include "compiler/codegen/nvrtc_compile.h"
#include "schemas/plan_writer.h"
#include "ir/support/error.h"
#include "runtime/tokenizer/tokenizer_bundle.h"

namespace kplan::plan {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("cannot read " + p.string());
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string config_text(const std::filesystem::path& dir) {
  // Accept the directory or its config.json, as the frontend does.
  return read_text(std::filesystem::is_directory(dir) ? dir / "config.json" : dir);
}

}  // namespace

std::vector<Weight> checkpoint_weights(const SafetensorsCheckpoint& checkpoint, const std::vector<TensorSpec>& specs) {
  std::vector<Weight> out;
  out.reserve(specs.size());
  for (const TensorSpec& spec : specs) {
    const TensorView& t = checkpoint.get(spec.name);
    Weight w;
    w.name = t.name;
    w.dtype = t.dtype;
    w.shape = t.shape;
    w.layout = spec.role == TensorRole::PackedInt4 ? "ct_pack_quantized_int4" : "row_major";
    w.view = t.bytes;
    out.push_back(std::move(w));
  }
  return out;
}

void describe_sources(const PlanSources& sources, Plan& p) {
  p.model = sources.model;
  p.draft = sources.draft;
  p.model_config_json = config_text(sources.model_dir);
  if (sources.draft_dir) p.draft_config_json = config_text(*sources.draft_dir);
  std::filesystem::path dir =
      std::filesystem::is_directory(sources.model_dir) ? sources.model_dir : sources.model_dir.parent_path();
  if (tokenizer::has_tokenizer_files(dir)) {
    p.tokenizer = tokenizer::bundle_tokenizer_files(dir);  // tiktoken.model + tokenizer_config.json
  } else if (std::filesystem::exists(dir / "tokenizer.json")) {
    std::string tok = read_text(dir / "tokenizer.json");
    p.tokenizer.assign(tok.begin(), tok.end());
  }
  p.ir_text = sources.ir_text;
}

Kernel kernel_record(const codegen::KernelSource& src) {
  Kernel kern;
  kern.id = src.id;
  kern.entry = src.entry;
  kern.family = src.family;
  kern.library = src.library;
  for (const codegen::KernelParam& c : src.params) kern.constants.push_back({c.name, c.value});
  for (const codegen::KernelArg& a : src.signature) {
    switch (a.kind) {
      case codegen::ArgKind::DevicePtr: kern.params.push_back(ParamType::Pointer); break;
      case codegen::ArgKind::I32: kern.params.push_back(ParamType::I32); break;
      case codegen::ArgKind::F32: kern.params.push_back(ParamType::F32); break;
      case codegen::ArgKind::TensorMap: kern.params.push_back(ParamType::TensorMap); break;
    }
    kern.param_names.push_back(a.name);
  }
  return kern;
}

Plan assemble_plan(const PlanSources& sources, LoweredPlan lowered, const AssembleOptions& options,
                   codegen::CompileStats* stats) {
  if (options.archs.empty()) throw Error("kplan compile: no --arch given");
  Plan p;
  for (const std::string& a : options.archs) p.header.archs.push_back(codegen::canonical_arch(a));
  p.header.compiler_version = "0.1.0";
  p.header.cuda_version = std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10);
  p.header.nvrtc_version = codegen::nvrtc_version();
  p.header.limits = lowered.limits;

  describe_sources(sources, p);

  codegen::CompileOptions copt = options.kernels;
  copt.archs = p.header.archs;
  const StageProgress& progress = options.progress;
  if (progress.begin || progress.advance || progress.end) {
    // compile_kernels' lines carry its counters ("codegen: [3/40] ..."); its summary is the
    // caller's to print (write_compiled_plan's line).
    copt.progress = [&progress](const std::string& line) {
      uint64_t done = 0, total = 0;
      if (parse_kernel_progress(line, &done, &total) && progress.advance) progress.advance(done, total);
    };
    if (progress.begin) progress.begin("compiling kernels", false, "kernels");
  }
  std::vector<codegen::KernelInstance> built = codegen::compile_kernels(lowered.kernels, copt, stats);
  if (progress.end) progress.end();
  const size_t n_arch = p.header.archs.size();
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    const codegen::KernelSource& src = lowered.kernels[k];
    Kernel kern = kernel_record(src);
    for (size_t a = 0; a < n_arch; ++a) {
      codegen::KernelInstance& inst = built[k * n_arch + a];
      if (a == 0) kern.cache_key = inst.cache_key;
      if (src.library.empty()) kern.binaries.push_back({inst.arch, std::move(inst.cubin)});
    }
    p.kernels.push_back(std::move(kern));
  }

  p.weights = std::move(lowered.weights);
  p.buffers = std::move(lowered.buffers);
  bool placed = false;
  for (const BufferSlot& s : p.buffers.slots) placed |= s.offset != 0;
  if (!placed) assign_arena_offsets(p.buffers);
  p.step_inputs = std::move(lowered.step_inputs);
  p.kv_caches = std::move(lowered.kv_caches);
  p.buckets = std::move(lowered.buckets);
  return p;
}

Plan write_plan_from_compile(const PlanSources& sources, LoweredPlan lowered, const AssembleOptions& options,
                             const std::filesystem::path& out, codegen::CompileStats* stats) {
  Plan p = assemble_plan(sources, std::move(lowered), options, stats);
  const StageProgress& progress = options.progress;
  if (!progress.begin && !progress.advance && !progress.end) {
    write_plan(p, out);
    return p;
  }
  // Two passes over the weights, a stage each: their checksums, then the file.
  std::string step;
  write_plan(p, out, [&](const char* now, uint64_t done, uint64_t total) {
    if (step != now) {
      if (!step.empty() && progress.end) progress.end();
      step = now;
      if (progress.begin)
        progress.begin(step == "hashing" ? "checksumming the weights" : "writing " + out.string(), true, "");
    }
    if (progress.advance) progress.advance(done, total);
  });
  if (!step.empty() && progress.end) progress.end();
  return p;
}

}  // namespace kplan::plan
