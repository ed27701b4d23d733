/* kplan runtime C API: the one door to a compiled plan (.kplan) for the CLI and any language
 * binding. Plain C, sized integer types, names of the form kplan_<noun>_<verb>.
 *
 * Errors: every call returns a kplan_status; on failure kplan_error_last() returns one line that
 * names the problem (valid until the next failing call on the same thread). A missing driver or
 * GPU is KPLAN_STATUS_NO_GPU with a message starting "no GPU: ".
 *
 * Environment: KPLAN_NO_GRAPHS=1 makes GPU sessions launch kernels one by one instead of replaying
 * one CUDA graph per bucket (debugging, profiling).
 *
 * Typical use:
 *   kplan_plan* plan;  kplan_plan_open("model.kplan", NULL, &plan);
 *   kplan_session* s;  kplan_session_create(plan, NULL, &s);      // GPU when present, else CPU
 *   kplan_session_step(s, tokens, positions, n, NULL, logits);    // logits: n * vocab floats
 *   kplan_session_commit(s, keep, n_keep);
 *   kplan_session_destroy(s); kplan_plan_close(plan);
 */
#ifndef KPLAN_KPLAN_H_
#define KPLAN_KPLAN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kplan_status {
  KPLAN_STATUS_OK = 0,
  KPLAN_STATUS_ERROR = 1,    /* bad input, damaged plan, failed step: see kplan_error_last() */
  KPLAN_STATUS_NO_GPU = 2,   /* no driver or no CUDA device (the CPU reference still works) */
} kplan_status;

/* The message of the last failure on this thread ("" when none). */
const char* kplan_error_last(void);
/* The runtime's version, e.g. "0.1.0". */
const char* kplan_version(void);

/* ---- plans ---- */
typedef struct kplan_plan kplan_plan;

typedef struct kplan_plan_open_options {
  int32_t verify_weights; /* 1 (default): check every weight's checksum on open */
} kplan_plan_open_options;

/* Maps and validates a plan file. `options` may be NULL. */
kplan_status kplan_plan_open(const char* path, const kplan_plan_open_options* options, kplan_plan** out);
void kplan_plan_close(kplan_plan* plan);

typedef enum kplan_plan_section {
  KPLAN_PLAN_SECTION_SUMMARY = 0,
  KPLAN_PLAN_SECTION_IR = 1,
  KPLAN_PLAN_SECTION_KERNELS = 2,
  KPLAN_PLAN_SECTION_MEMORY = 3,
  KPLAN_PLAN_SECTION_LAUNCHES = 4,
  KPLAN_PLAN_SECTION_WEIGHTS = 5,
} kplan_plan_section;

/* Readable text of one section of the plan; owned by the plan, valid until it is closed. */
kplan_status kplan_plan_describe(kplan_plan* plan, kplan_plan_section section, const char** text);

typedef struct kplan_plan_info {
  uint32_t format_version;
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t num_layers;
  int64_t max_tokens_per_step;
  int64_t max_tree_nodes;
  int64_t max_context;
  uint64_t weight_bytes;        /* all weights */
  uint64_t decode_read_bytes;   /* weights one AR decode step reads (routed experts: top-k share) */
  uint64_t kv_bytes_per_token;  /* KV cache bytes per cached position, all layers */
  int32_t num_archs;
  char archs[8][16];            /* "sm_90", ... */
} kplan_plan_info;

kplan_status kplan_plan_info_get(const kplan_plan* plan, kplan_plan_info* info);
/* The plan's model config.json text (owned by the plan). */
const char* kplan_plan_config_json(const kplan_plan* plan);
/* The plan's tokenizer data (a tiktoken bundle, see runtime/tokenizer/tokenizer_bundle.h; owned by
 * the plan); *size is 0 when the plan has none. */
const uint8_t* kplan_plan_tokenizer(const kplan_plan* plan, uint64_t* size);
/* The plan's drafter config.json text ("" when it has no drafter). */
const char* kplan_plan_draft_config_json(const kplan_plan* plan);

/* ---- devices ---- */
typedef struct kplan_device_info {
  char name[128];   /* "NVIDIA H200" */
  char arch[16];    /* "sm_90" */
  int32_t sm_count;
  uint64_t memory_bytes;
  int32_t driver_version;
} kplan_device_info;

/* KPLAN_STATUS_NO_GPU (with the reason in kplan_error_last) when no GPU can be used. */
kplan_status kplan_device_probe(kplan_device_info* info);

/* ---- sessions: a loaded model with its KV cache ---- */
typedef struct kplan_session kplan_session;

typedef enum kplan_device_kind {
  KPLAN_DEVICE_AUTO = 0, /* the GPU when one is usable, else the CPU reference */
  KPLAN_DEVICE_GPU = 1,
  KPLAN_DEVICE_CPU = 2,
} kplan_device_kind;

typedef struct kplan_session_options {
  kplan_device_kind device;
  int32_t use_graphs;   /* 1 (default): one CUDA graph per bucket; 0: plain launches */
  int64_t max_context;  /* CPU reference only: KV cache positions (0: the plan's limit) */
} kplan_session_options;

/* Loads the plan onto the device (the plan must stay open while the session lives).
 * `options` may be NULL (AUTO, graphs). */
kplan_status kplan_session_create(kplan_plan* plan, const kplan_session_options* options, kplan_session** out);
void kplan_session_destroy(kplan_session* session);
/* KPLAN_DEVICE_GPU or KPLAN_DEVICE_CPU: where the session runs. */
kplan_device_kind kplan_session_device(const kplan_session* session);
/* Seconds the session took to load (GPU: modules, weight upload, graphs). */
double kplan_session_load_seconds(const kplan_session* session);

/* One target step of n tokens at the given positions against the committed cache.
 * tree_mask: NULL for causal, else n * ceil(n/32) words (bit j of row i: token i attends j).
 * logits: NULL or room for n * vocab floats. The step's cache entries stay pending until
 * kplan_session_commit. */
kplan_status kplan_session_step(kplan_session* session, const int32_t* tokens, const int32_t* positions,
                                int32_t n, const uint32_t* tree_mask, float* logits);
/* Keeps pending entries keep[0..n) (increasing step indices) and commits them. */
kplan_status kplan_session_commit(kplan_session* session, const int32_t* keep, int32_t n);
int64_t kplan_session_cache_length(const kplan_session* session);
int64_t kplan_session_max_context(const kplan_session* session);
kplan_status kplan_session_reset(kplan_session* session);
/* Layers whose outputs kplan_session_captured returns after each step (the drafter's). */
kplan_status kplan_session_capture_layers_set(kplan_session* session, const int64_t* layers, int32_t n);
/* Capture layer `index` (in the order set) of the last step: rows * hidden floats into out. */
kplan_status kplan_session_captured(kplan_session* session, int32_t index, float* out, int64_t capacity);

/* Greedy AR generation: prefill the prompt, then n_new argmax tokens written to out_ids. */
kplan_status kplan_session_generate_greedy(kplan_session* session, const int32_t* prompt, int32_t n_prompt,
                                           int32_t n_new, int32_t* out_ids);

/* ---- benchmark (GPU sessions) ---- */
typedef struct kplan_bench_result {
  int32_t tokens;            /* tokens per step (the bucket's) */
  int32_t steps;             /* timed replays */
  int64_t context;           /* cache length the decode step ran against */
  double step_ms_median;     /* one step of the bucket, graph replay, GPU time */
  double step_ms_min;
  double step_ms_p90;
  double read_bytes;         /* bytes the step must read: weights (routed experts: expected share
                                touched by `tokens` tokens) + KV at `context` */
  double achieved_gbps;      /* read_bytes / median step time, GB/s (1e9) */
  double load_seconds;       /* session load */
} kplan_bench_result;

/* Times `steps` replays of the 1-token decode bucket after prefilling `context` positions. */
kplan_status kplan_session_bench_decode(kplan_session* session, int32_t steps, int64_t context,
                                        kplan_bench_result* out);
/* The same for the bucket of `tokens` tokens (a tree verify or prefill step: causal mask). */
kplan_status kplan_session_bench_step(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                      kplan_bench_result* out);
/* The token counts of the plan's target buckets, ascending; returns how many (at most `capacity`
 * written). */
int32_t kplan_plan_buckets_get(const kplan_plan* plan, int32_t* tokens, int32_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* KPLAN_KPLAN_H_ */
