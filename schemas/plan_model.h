#pragma once
// The in-memory plan: everything `kplan compile` decides ahead of time and the runtime needs to
// run a model. plan_writer.h stores it as a .kplan file (a FlatBuffer, schemas/kplan.fbs, then an
// aligned weights data section); plan_reader.h maps it back. Launches are data: kernel index,
// grid, block, shared memory, and arguments that name buffer slots, weights, scalars and step
// inputs, never raw pointers; the runtime resolves them at load and builds one CUDA graph per
// bucket from them.
//
// Contracts the lowering (compiler/codegen) and the runtime (runtime/gpu) both rely on:
// - One device arena holds every BufferSlot at its offset (BufferPlan::arena_size bytes).
// - Step inputs are written by the host into their slots before each step; graphs only read them
//   (kernels take a pointer to them, so no graph is rebuilt when they change):
//     Tokens      i32[bucket tokens]           token ids, padded with 0 after token_count
//     Positions   i32[bucket tokens]           position id of each token (tree node: root + depth)
//     TreeMask    u32[bucket tokens, words]    ancestor bitmask over the step's tokens, words =
//                                              ceil(tokens/32); bit j of row i: i attends new j.
//                                              The host writes a causal mask when none is given.
//     CacheLength i32[1]                        committed positions in the KV cache (S)
//     TokenCount  i32[1]                        real tokens in this step (<= the bucket's tokens)
// - KV caches: row r of a KvCache holds cache position r (row_bytes each, `rows` rows). A step
//   writes its T entries at rows CacheLength .. CacheLength+T-1 (pending); the runtime commits a
//   step by moving kept rows CacheLength+keep[i] -> CacheLength+i and advancing CacheLength.
// - A bucket serves every step of program `program` with token_count <= tokens; its outputs
//   (logits, captured hidden states, the argmax token ids "next_tokens" as OutputKind::TokenIds
//   i32[tokens, 1]) are read back from the slots its StepOutputs name.
// - Program "target_commit" (one bucket, tokens = the largest target bucket) is the KV commit on
//   the device: one kv_compact launch per cache. Before running it the host writes keep[] (the
//   accepted step rows, increasing) into the Tokens input, their count into TokenCount, and the
//   committed length before the step into CacheLength; afterwards CacheLength += count.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/support/dtype.h"
#include "schemas/model_spec.h"

namespace kplan::plan {

// Bumped whenever the file layout or the meaning of a field changes; the runtime refuses a plan
// with a newer version than it knows.
// 2: the typed model spec and weight sources. Launch records' cluster dims, SM-count grids and
// tensor maps are appended FlatBuffers fields (absent when unused); a reader that predates them
// refuses a plan that uses them through its unknown-enum check (ArgKind / ParamType TensorMap);
// Kernel::library likewise (such a reader finds the kernel without a cubin and says so).
inline constexpr uint32_t kFormatVersion = 2;

struct Limits {
  int64_t max_tokens_per_step = 0;  // the largest bucket
  int64_t max_tree_nodes = 0;       // the largest tree verify bucket (0: no tree buckets)
  int64_t max_context = 0;          // KV cache rows
  bool operator==(const Limits&) const = default;
};

struct Header {
  uint32_t format_version = kFormatVersion;
  std::string compiler_version;  // kplan version that wrote the plan
  std::string cuda_version;      // CUDA toolkit the kernels were built with, e.g. "13.0"
  std::string nvrtc_version;     // e.g. "13.0"
  std::vector<std::string> archs;  // e.g. {"sm_90", "sm_120"}: every kernel has a cubin for each
  Limits limits;
  bool operator==(const Header&) const = default;
};

// The C type of one kernel parameter, in declaration order (the launch signature). TensorMap:
// a `const __grid_constant__ CUtensorMap` (128 bytes, by value) for TMA loads / stores.
enum class ParamType : uint8_t { Pointer, I32, I64, F32, TensorMap };

struct KernelBinary {
  std::string arch;            // "sm_90"
  std::vector<uint8_t> cubin;  // NVRTC output for that arch
  bool operator==(const KernelBinary&) const = default;
};

// A compile-time constant the kernel instance was specialised with (recorded for dumps).
struct KernelConstant {
  std::string name;
  int64_t value = 0;
  bool operator==(const KernelConstant&) const = default;
};

struct Kernel {
  std::string id;      // readable instance id, e.g. "rms_norm_h256_bf16"
  std::string entry;   // symbol to look up in the cubin (extern "C" or mangled name)
  std::string family;  // template family, e.g. "rms_norm"
  std::string cache_key;  // kernel cache hash (hex), for dumps
  std::vector<KernelConstant> constants;
  std::vector<ParamType> params;
  std::vector<std::string> param_names;  // same length as params (may be empty strings)
  std::vector<KernelBinary> binaries;    // one per arch of Header::archs (none for a library call)
  // Non-empty: no cubin; the runtime makes this library's call with the launch's arguments and
  // the constants ("cublaslt": compiler/codegen/families/cublaslt_matmul.h).
  std::string library;
  const KernelBinary* binary_for(const std::string& arch) const;
  // The constant named `name`, and the index of the parameter (launch argument) named `name`,
  // where the kernel has one.
  std::optional<int64_t> constant(const std::string& name) const;
  std::optional<size_t> param_index(const std::string& name) const;
  bool operator==(const Kernel&) const = default;
};

// A weight generated at load instead of read (`kplan compile --synthetic-weights SEED`): its
// values are ir/support/synthetic_values.h's for (seed, stream), drawn from a normal-ish
// distribution of `mean` and `stddev`, or for INT4 the compressed-tensors quantisation of such a
// virtual float weight (mean 0, `stddev`) in groups of `group_size`: Int4Packed the int32 words
// ([..., in / 8]), Int4Scale the bf16 scales ([..., in / group_size]); a packed weight and its
// scales share the stream and stddev. The CPU reference computes the values on the host; the
// GPU runtime launches plan kernel `kernel` (family synthetic_weights) once per weight at load.
enum class SyntheticKind : uint8_t { Normal, Int4Packed, Int4Scale };

struct SyntheticInit {
  uint64_t seed = 0;
  uint64_t stream = 0;
  SyntheticKind kind = SyntheticKind::Normal;
  float mean = 0.0f;
  float stddev = 0.0f;
  uint32_t group_size = 0;
  uint32_t kernel = 0;
  bool operator==(const SyntheticInit&) const = default;
};

struct Weight {
  std::string name;  // checkpoint tensor name (or a derived name for repacked tensors)
  std::string source = "target";  // the checkpoint it came from: "target" or "draft" (IR ckpt)
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;
  std::string layout = "row_major";  // how the bytes are arranged (e.g. "int4_pack8_k")
  // Placement in the file's data section, set by the writer (bytes; offset aligned to
  // kWeightAlignment); the reader fills them from the file.
  uint64_t offset = 0;
  uint64_t size = 0;
  uint64_t checksum = 0;  // XXH3-64 of the bytes, set by the writer, checked by the reader
  // The bytes: either owned here, or a view of memory that outlives the plan (a mapped checkpoint
  // or plan file; see Plan::backing). data() returns whichever is set.
  std::vector<uint8_t> owned;
  std::span<const uint8_t> view;
  std::span<const uint8_t> data() const {
    return owned.empty() ? view : std::span<const uint8_t>(owned);
  }
  // Set: no bytes (data() empty, offset and checksum 0); size is the bytes it will hold.
  std::optional<SyntheticInit> synthetic;
  // The bytes the weight holds (synthetic: the bytes it will hold once generated).
  uint64_t byte_size() const { return synthetic ? size : data().size(); }
};

enum class SlotRole : uint8_t {
  Scratch,     // activations, dead between steps
  Persistent,  // lives across steps (KV caches)
  Input,       // a step input written by the host
  Output,      // read back by the host after a step
};

struct BufferSlot {
  std::string name;
  SlotRole role = SlotRole::Scratch;
  uint64_t offset = 0;  // in the arena
  uint64_t size = 0;
  uint64_t alignment = 256;
  bool operator==(const BufferSlot&) const = default;
};

struct BufferPlan {
  uint64_t arena_size = 0;
  std::vector<BufferSlot> slots;
  bool operator==(const BufferPlan&) const = default;
};

enum class StepInputKind : uint8_t { Tokens, Positions, TreeMask, CacheLength, TokenCount };
inline constexpr int kStepInputKinds = 5;

struct StepInputBinding {
  StepInputKind kind = StepInputKind::Tokens;
  uint32_t slot = 0;  // index into BufferPlan::slots
  bool operator==(const StepInputBinding&) const = default;
};

struct KvCache {
  std::string name;  // e.g. "layer3.latent"
  uint32_t slot = 0;
  uint64_t row_bytes = 0;
  uint64_t rows = 0;
  bool operator==(const KvCache&) const = default;
};

enum class ArgKind : uint8_t {
  Buffer,     // device pointer: arena + slots[index].offset + offset
  Weight,     // device pointer: weights[index] + offset
  I32,        // scalar ival
  I64,        // scalar ival
  F32,        // scalar fval
  StepInput,  // device pointer to the step input's slot; index = StepInputKind
  TensorMap,  // a CUtensorMap the runtime encodes at load; index = Launch::tensor_maps
};

enum class TensorMapSwizzle : uint8_t { None, B32, B64, B128 };  // CU_TENSOR_MAP_SWIZZLE_*

// A TMA tensor map, as data: the runtime encodes it with cuTensorMapEncodeTiled once the arena
// and the weights have device addresses (runtime/gpu/launch_resolve.h). Interleave is none, L2
// promotion 128 B, out-of-bounds elements read as zero.
struct TensorMapDesc {
  ArgKind base = ArgKind::Buffer;  // Buffer (a slot) or Weight
  uint32_t index = 0;              // the slot or weight
  uint64_t offset = 0;             // bytes from the slot's / weight's start; a multiple of 16
  DType dtype = DType::BF16;       // F32, BF16, F16, I32 or U8
  std::vector<uint64_t> dims;      // elements per dimension, innermost first (rank 1..5)
  std::vector<uint64_t> strides;   // bytes between steps of dims[1..] (rank - 1 entries, multiples of 16)
  std::vector<uint32_t> box;       // the tile one TMA copy moves, elements per dimension (1..256 each)
  TensorMapSwizzle swizzle = TensorMapSwizzle::None;
  bool operator==(const TensorMapDesc&) const = default;
};

struct LaunchArg {
  ArgKind kind = ArgKind::I32;
  uint32_t index = 0;
  uint64_t offset = 0;
  int64_t ival = 0;
  float fval = 0.0f;
  bool operator==(const LaunchArg&) const = default;

  static LaunchArg buffer(uint32_t slot, uint64_t offset = 0) { return {ArgKind::Buffer, slot, offset, 0, 0}; }
  static LaunchArg weight(uint32_t w, uint64_t offset = 0) { return {ArgKind::Weight, w, offset, 0, 0}; }
  static LaunchArg i32(int32_t v) { return {ArgKind::I32, 0, 0, v, 0}; }
  static LaunchArg i64(int64_t v) { return {ArgKind::I64, 0, 0, v, 0}; }
  static LaunchArg f32(float v) { return {ArgKind::F32, 0, 0, 0, v}; }
  static LaunchArg step_input(StepInputKind k) {
    return {ArgKind::StepInput, static_cast<uint32_t>(k), 0, 0, 0};
  }
};

struct Launch {
  uint32_t kernel = 0;  // index into Plan::kernels
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  uint32_t smem_bytes = 0;  // dynamic shared memory
  std::vector<LaunchArg> args;  // one per kernel param, matching its ParamType
  std::string note;  // the IR op(s) it implements, for dumps (e.g. "%12 = rms_norm(...)")
  // Thread-block cluster ({1, 1, 1}: none; else launched with cuLaunchKernelEx). Each grid dim
  // is a multiple of the cluster's; at most 8 blocks per cluster (the portable limit).
  std::array<uint32_t, 3> cluster{1, 1, 1};
  // > 0: a persistent kernel, grid.x = grid_x_per_sm * the device's SM count, rounded down to
  // a multiple of cluster.x, resolved at load (grid[0] is 0 in the plan).
  uint32_t grid_x_per_sm = 0;
  std::vector<TensorMapDesc> tensor_maps;  // what TensorMap arguments name
  bool operator==(const Launch&) const = default;
};

// TopLogProbs / TopIds: @draft's per-depth candidates [B-1, k] (f32 log-probabilities, i32 ids).
// RoundState: a device round's state (i32 [1, words], kernels_templates/ddtree_round.cuh), an
// output of the round_walk buckets.
enum class OutputKind : uint8_t { Logits, Hidden, TokenIds, TopLogProbs, TopIds, RoundState };

struct StepOutput {
  OutputKind kind = OutputKind::Logits;
  int64_t layer = -1;   // Hidden: the decoder layer whose output this is
  uint32_t slot = 0;
  uint64_t offset = 0;  // in the slot
  DType dtype = DType::F32;
  int64_t rows = 0;     // = the bucket's tokens
  int64_t cols = 0;     // vocab (Logits), hidden (Hidden), 1 (TokenIds), k (TopLogProbs, TopIds), words (RoundState)
  bool operator==(const StepOutput&) const = default;
};

struct Bucket {
  std::string program = "target";  // its IR function ("target", "draft", ...) or a round_* step (emit-round)
  uint32_t tokens = 1;             // step size this bucket is specialised for
  std::vector<Launch> launches;
  std::vector<StepOutput> outputs;
  bool operator==(const Bucket&) const = default;
};

struct Plan {
  Header header;
  ModelConfig model;                 // the target's architecture, typed (what the runtime reads)
  std::optional<DraftConfig> draft;  // the drafter's, when the plan has one
  std::string model_config_json;  // the target's config.json text as published (provenance, inspect)
  std::string draft_config_json;  // the drafter's config.json text ("" when none)
  std::vector<uint8_t> tokenizer;  // runtime/tokenizer bundle (tiktoken), or tokenizer.json bytes; empty when none
  std::string ir_text;             // the final IR, as printed
  std::vector<Kernel> kernels;
  std::vector<Weight> weights;
  BufferPlan buffers;
  std::vector<StepInputBinding> step_inputs;
  std::vector<KvCache> kv_caches;
  std::vector<Bucket> buckets;
  // Keeps the memory behind Weight::view alive (the mapped file, for a plan that was read).
  std::shared_ptr<const void> backing;

  // Lookups; return -1 / nullptr when absent. weight_index(name) looks in the target's weights.
  int64_t weight_index(const std::string& name) const;
  int64_t weight_index(const std::string& source, const std::string& name) const;
  const Bucket* bucket_for(const std::string& program, int64_t tokens) const;
  const StepInputBinding* step_input(StepInputKind kind) const;
};

// Weights sit at offsets aligned to this in the data section; the data section itself starts at a
// page (kDataAlignment) boundary of the file, so a mapped plan can be uploaded without copies.
inline constexpr uint64_t kWeightAlignment = 256;
inline constexpr uint64_t kDataAlignment = 4096;

// Packs every slot of `buffers` one after another at its alignment (no reuse between slots) and
// sets arena_size. A memory planner with liveness reuse may assign offsets itself instead.
void assign_arena_offsets(BufferPlan& buffers);

// Checks the plan is self-consistent (indices in range, launch args matching kernel signatures,
// slots inside the arena, each kernel built for every header arch, step input slots large enough
// for the buckets...). Throws kplan::Error naming the first problem; `source` names the plan.
void validate_plan(const Plan& plan, const std::string& source);

// Names used in dumps and errors.
const char* param_type_name(ParamType t);
const char* slot_role_name(SlotRole r);
const char* step_input_name(StepInputKind k);
const char* arg_kind_name(ArgKind k);
const char* output_kind_name(OutputKind k);
const char* swizzle_name(TensorMapSwizzle s);
const char* synthetic_kind_name(SyntheticKind k);

// The synthetic_weights kernel's parameters (kernels_templates/synthetic_weights.cuh): out,
// n_lo, n_hi, key_lo, key_hi, mean, step.
inline constexpr ParamType kSyntheticKernelParams[] = {ParamType::Pointer, ParamType::I32, ParamType::I32, ParamType::I32,
                                                       ParamType::I32,     ParamType::F32, ParamType::F32};
// Units the kernel writes for a weight: elements (Normal), 32-bit words (Int4Packed), groups
// (Int4Scale).
uint64_t synthetic_units(const Weight& w);

}  // namespace kplan::plan
