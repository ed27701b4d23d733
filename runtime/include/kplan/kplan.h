/* kplan runtime C API: the one door to a compiled plan (.kplan) for the CLI and any language
 * binding. Plain C, sized integer types, names of the form kplan_<noun>_<verb>. This folder is
 * self-contained: it includes nothing but the C standard headers.
 *
 * Three handles: a plan (the mapped file), a model (the plan loaded onto one device: modules and
 * weights uploaded once) and sessions on a model (each its own KV cache, step inputs and CUDA
 * graphs; any number share the model's weights). Handles may be destroyed in any order: a
 * session keeps what it uses of its model alive, a model what it uses of its plan.
 *
 * Structs whose first field is `struct_size` may grow: set it to sizeof the struct you compiled
 * against (the *_init functions do, with the defaults); the runtime reads or writes only the
 * fields that fit.
 *
 * Errors: every call returns a kplan_status; on failure kplan_error_last() returns one line that
 * names the problem (valid until the next failing call on the same thread). A missing driver or
 * GPU is KPLAN_STATUS_NO_GPU with a message starting "no GPU: ".
 *
 * Environment: KPLAN_NO_GRAPHS=1 makes GPU sessions launch kernels one by one instead of replaying
 * one CUDA graph per bucket (debugging, profiling).
 *
 * Typical use:
 *   kplan_plan* plan;    kplan_plan_open("model.kplan", NULL, &plan);
 *   kplan_model* model;  kplan_model_create(plan, NULL, &model);   // GPU when present, else CPU
 *   kplan_session* s;    kplan_session_create(model, NULL, &s);
 *   kplan_generate_options g; kplan_generate_options_init(&g); g.spec = KPLAN_SPEC_DDTREE;
 *   kplan_session_generate(s, prompt, n_prompt, &g, out, capacity, &n_out, NULL);
 *   kplan_session_destroy(s); kplan_model_destroy(model); kplan_plan_close(plan);
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

/* Progress of a long step (a plan's checksums, the weights' upload): `done` of `total` bytes. It
 * is called on the thread that made the call, once with done = 0 when the total is known, then as
 * the work advances (at most once per chunk of several MiB), the last time with done = total when
 * the step completes. It must not call into the object being made. */
typedef void (*kplan_progress_callback)(void* user_data, uint64_t done, uint64_t total);

/* kplan_plan_open, reporting the weight bytes hashed while their checksums are verified (not
 * called with verify_weights = 0 or a plan without weight bytes). `on_progress` may be NULL. */
kplan_status kplan_plan_open_with_progress(const char* path, const kplan_plan_open_options* options,
                                           kplan_progress_callback on_progress, void* user_data, kplan_plan** out);
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
  uint32_t struct_size;         /* sizeof(kplan_plan_info) */
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
  int32_t has_drafter;          /* 1: the plan carries a DFlash drafter */
  int32_t draft_block_size;     /* its block size (positions per proposal + 1); 0 without one */
  int32_t has_tokenizer;        /* 1: kplan_tokenizer_encode / _decode work on this plan */
} kplan_plan_info;

kplan_status kplan_plan_info_get(const kplan_plan* plan, kplan_plan_info* info);
/* The plan's model config.json text (owned by the plan). */
const char* kplan_plan_config_json(const kplan_plan* plan);
/* The plan's tokenizer data (a tiktoken bundle: JSON {"format": "kplan-tiktoken-1", ...}; owned by
 * the plan); *size is 0 when the plan has none. */
const uint8_t* kplan_plan_tokenizer(const kplan_plan* plan, uint64_t* size);

/* ---- the plan's tokenizer ---- */
/* Text (UTF-8 bytes, special tokens such as <|im_end|> written in it become their ids) to token
 * ids. *n_ids is set to the number of ids; KPLAN_STATUS_ERROR when they do not fit `capacity`
 * (call with capacity 0 to ask) or the plan has no tokenizer ("no tokenizer: ..."). */
kplan_status kplan_tokenizer_encode(const kplan_plan* plan, const char* text, size_t length, int32_t* ids,
                                    int32_t capacity, int32_t* n_ids);
/* Token ids to the raw bytes the model made (not NUL-terminated). *length is set to their count;
 * KPLAN_STATUS_ERROR when they do not fit `capacity`, an id is outside the vocabulary, or the
 * plan has no tokenizer. */
kplan_status kplan_tokenizer_decode(const kplan_plan* plan, const int32_t* ids, int32_t n_ids, char* text,
                                    size_t capacity, size_t* length);
/* ---- chat templates ---- */
/* The plan's chat template as its checkpoint shipped it (chat_template.jinja, else
 * tokenizer_config.json's `chat_template`: a string, or the list entry named "default"); owned by
 * the plan; "" when it has none (or its chat_template entry is malformed: kplan_chat_template_apply
 * says how). */
const char* kplan_plan_chat_template(const kplan_plan* plan);
/* Renders a conversation to prompt text with the plan's chat template, as transformers'
 * apply_chat_template(..., tokenize=False) renders it (kplan renders the subset of Jinja real
 * templates use and refuses the rest naming the construct and line: runtime/tokenizer/chat_template.h).
 * `conversation_json` (UTF-8, NUL-terminated): a JSON array of messages, each an object with a
 * string "role" and a "content" (a string, null, or a list of {"type": "text", "text": ...} parts;
 * other keys such as "name", "tool_calls", "tool_call_id", "reasoning_content" are passed on), or an
 * object {"messages": [...], ...} whose other keys become template variables too (e.g. "tools").
 * bos_token and eos_token are the tokenizer config's; add_generation_prompt: 1 ends the text
 * with the opening of the assistant's turn. *length is set to the text's byte count;
 * KPLAN_STATUS_ERROR when it does not fit `capacity` (call with capacity 0 to ask), the plan has
 * no template ("no chat template: ..."), the conversation is malformed (the message names the
 * field, e.g. "messages[1].role") or the template fails (its line). The text is NUL-terminated
 * when capacity > *length. Tokenize it with kplan_tokenizer_encode (special tokens become ids). */
kplan_status kplan_chat_template_apply(const kplan_plan* plan, const char* conversation_json,
                                       int32_t add_generation_prompt, char* text, size_t capacity, size_t* length);
/* The plan's drafter config.json text ("" when it has no drafter). */
const char* kplan_plan_draft_config_json(const kplan_plan* plan);
/* The model's EOS ids the plan carries (config.json's, generation_config.json's and the
 * tokenizer's end-of-turn tokens, merged at compile time); returns how many (at most `capacity`
 * written). */
int32_t kplan_plan_eos_ids_get(const kplan_plan* plan, int64_t* ids, int32_t capacity);

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

typedef enum kplan_device_kind {
  KPLAN_DEVICE_AUTO = 0, /* the GPU when one is usable, else the CPU reference */
  KPLAN_DEVICE_GPU = 1,
  KPLAN_DEVICE_CPU = 2,
} kplan_device_kind;

/* ---- models: a plan on one device, weights uploaded once ---- */
typedef struct kplan_model kplan_model;

typedef struct kplan_model_options {
  uint32_t struct_size;      /* sizeof(kplan_model_options) */
  kplan_device_kind device;  /* AUTO (default), GPU or CPU */
} kplan_model_options;

void kplan_model_options_init(kplan_model_options* options);
/* Loads the plan onto the device: on the GPU the cubins of its arch and every weight a launch
 * reads, once. `options` may be NULL (AUTO). */
kplan_status kplan_model_create(kplan_plan* plan, const kplan_model_options* options, kplan_model** out);
/* kplan_model_create, reporting the weight bytes uploaded to the GPU (0 of the bytes to upload
 * before the upload, all of them once the weights are on the device). Not called on the CPU
 * reference, which copies nothing at create (its fp32 copies are made as sessions first read
 * them). `on_progress` may be NULL. */
kplan_status kplan_model_create_with_progress(kplan_plan* plan, const kplan_model_options* options,
                                              kplan_progress_callback on_progress, void* user_data,
                                              kplan_model** out);
void kplan_model_destroy(kplan_model* model);

typedef struct kplan_model_info {
  uint32_t struct_size;          /* sizeof(kplan_model_info) */
  kplan_device_kind device;      /* GPU or CPU: where the model runs */
  int32_t sessions;              /* sessions alive on the model */
  int32_t weight_uploads;        /* times the weights were copied for the device: 1 on the GPU (at
                                    create, never per session); on the CPU 1 once a session has
                                    read them (one fp32 copy, shared by every session), else 0 */
  uint64_t weight_upload_bytes;  /* bytes those copies hold */
  uint64_t device_weight_bytes;  /* weight bytes resident in device memory */
  int64_t max_step_tokens;       /* most tokens one step takes (GPU: the largest bucket); 0: any */
  double load_seconds;           /* create: modules and weight upload */
  /* Appended: device memory in use on the model's GPU when asked (total less free, every
   * process's: cuMemGetInfo), for leak checks (kplan soak); 0 on the CPU. */
  uint64_t device_memory_used;
} kplan_model_info;

kplan_status kplan_model_info_get(const kplan_model* model, kplan_model_info* info);

/* ---- sessions: one decoding stream on a model (KV cache, step inputs, graphs) ---- */
typedef struct kplan_session kplan_session;

typedef struct kplan_session_options {
  uint32_t struct_size;     /* sizeof(kplan_session_options) */
  int32_t use_graphs;       /* GPU: 1 (default) one CUDA graph per bucket; 0: plain launches */
  int64_t max_context;      /* CPU reference only: KV cache positions (0: the plan's limit) */
  int64_t max_step_tokens;  /* 0 (default): the model's largest step; else at most this many
                               tokens per step (prompts are fed in chunks of it) */
} kplan_session_options;

void kplan_session_options_init(kplan_session_options* options);
/* A fresh session (empty KV cache) on the model. `options` may be NULL (the defaults). */
kplan_status kplan_session_create(kplan_model* model, const kplan_session_options* options, kplan_session** out);
void kplan_session_destroy(kplan_session* session);
/* KPLAN_DEVICE_GPU or KPLAN_DEVICE_CPU: where the session runs. */
kplan_device_kind kplan_session_device(const kplan_session* session);
/* Seconds the session took to create (GPU: arena and graphs; the model's load apart). */
double kplan_session_load_seconds(const kplan_session* session);
/* The most tokens one kplan_session_step takes (0: any). */
int64_t kplan_session_max_step_tokens(const kplan_session* session);

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

/* ---- generation: the decode loops behind the API ---- */
typedef enum kplan_spec_mode {
  KPLAN_SPEC_NONE = 0,    /* plain autoregressive decoding */
  KPLAN_SPEC_DFLASH = 1,  /* one draft path per round: the drafter's argmax chain */
  KPLAN_SPEC_DDTREE = 2,  /* a best-first draft tree of `budget` nodes per round */
} kplan_spec_mode;

typedef enum kplan_drafter_kind {
  KPLAN_DRAFTER_DFLASH = 0,  /* the plan's DFlash drafter (compiled with --draft) */
  KPLAN_DRAFTER_ORACLE = 1,  /* tests, measurements: told the true continuation */
  KPLAN_DRAFTER_RANDOM = 2,  /* tests: seeded random proposals */
} kplan_drafter_kind;

#define KPLAN_BUDGET_AUTO (-1) /* kplan_generate_options.budget chosen per round */

/* Called with each token a generate emits, in order, as it is emitted (streaming; a DDTree round
 * emits its accepted tokens one call each). Return 0 to go on, non-zero to stop after this token.
 * Runs on the thread that called kplan_session_generate; it must not call into the same session. */
typedef int32_t (*kplan_token_callback)(void* user_data, int32_t token);

typedef struct kplan_generate_options {
  uint32_t struct_size;        /* sizeof(kplan_generate_options) */
  kplan_spec_mode spec;        /* NONE (default) */
  kplan_drafter_kind drafter;  /* DFLASH (default) */
  int32_t budget;              /* DDTree: tree nodes per round, verify = 1 + budget tokens (16);
                                  KPLAN_BUDGET_AUTO: each round's from the measured step costs and
                                  the acceptance so far (GPU sessions) */
  int32_t max_new;             /* tokens to generate, fewer on EOS (16) */
  double temperature;          /* 0 (default): greedy; > 0: sampling (lossless) */
  uint64_t seed;               /* sampling and the oracle / random drafters (0) */
  int32_t stop_at_eos;         /* 1 (default): stop after emitting one of the model's EOS ids */
  int32_t draft_depth;         /* oracle / random: positions per proposal (0: the plan drafter's
                                  block size - 1, else 7) */
  double oracle_accuracy;      /* oracle: chance of proposing the true token per depth (0.8) */
  const int32_t* oracle_continuation;  /* oracle: the true tokens after the prompt; NULL: the
                                          session decodes AR with these settings first */
  int32_t oracle_continuation_length;
  /* Appended: the sampling processors, applied to the target's logits in this order: penalties,
   * temperature, top-k, top-p, min-p (HF transformers' and vLLM's order). Lossless under DFlash and
   * DDTree: the tree walk samples from the processed distribution, one pick per emitted token, so a
   * seed gives AR's sample. At temperature 0 the penalties still apply (argmax of the penalised
   * logits); the truncations change nothing there. */
  int32_t top_k;               /* keep the k most likely tokens; 0 (default): off */
  double top_p;                /* keep the fewest most likely tokens whose probability reaches
                                  top_p, in (0, 1]; 1 (default): off */
  double min_p;                /* drop tokens below min_p x the top token's probability, in [0, 1];
                                  0 (default): off */
  double repetition_penalty;   /* > 0; tokens of the prompt or output: positive logits divided by
                                  it, negative ones multiplied; 1 (default): off */
  double frequency_penalty;    /* logit -= frequency_penalty x the token's count in the output (0) */
  double presence_penalty;     /* logit -= presence_penalty once the token is in the output (0) */
  /* Stop after the token whose text completes one of these strings (the token is kept; needs the
   * plan's tokenizer). NULL / 0: none. */
  const char* const* stop_strings;
  int32_t n_stop_strings;
  kplan_token_callback on_token;  /* NULL (default): none */
  void* on_token_user_data;
} kplan_generate_options;

void kplan_generate_options_init(kplan_generate_options* options);

#define KPLAN_ACCEPTANCE_BINS 32 /* kplan_generate_stats.acceptance_histogram's length */

typedef struct kplan_generate_stats {
  uint32_t struct_size;          /* sizeof(kplan_generate_stats) */
  int64_t prompt_tokens;
  int64_t generated_tokens;
  int64_t prefill_steps;         /* target steps of the prefill (chunks of the largest step) */
  int64_t rounds;                /* target steps after prefill (AR: one per token; else verifies) */
  int64_t committed_in_rounds;   /* tokens the rounds produced (root + accepted path each) */
  int64_t tree_nodes;            /* verify tokens over all rounds */
  int64_t target_forwards;       /* prefill (once) + rounds */
  double mean_acceptance_length; /* committed_in_rounds / rounds */
  int32_t stopped_at_context;    /* 1: the KV cache filled before max_new / EOS */
  double seconds_prefill;
  double seconds_draft;          /* the drafter's propose and observe */
  double seconds_tree_build;
  double seconds_verify;
  double seconds_walk_commit;    /* the walk and the KV compaction */
  /* Appended (a caller whose struct_size ends before here gets none of it): rounds by the tokens
   * their verify pass committed. [i] counts the rounds that committed i + 1 tokens (root +
   * accepted path), the last bin those that committed KPLAN_ACCEPTANCE_BINS or more; the bins sum
   * to `rounds` (AR: every round in [0]). */
  int64_t acceptance_histogram[KPLAN_ACCEPTANCE_BINS];
  /* Appended: the rounds' wall time, and how much of it the host spent waiting for the device
   * (GPU sessions; 0 on the CPU). (seconds_rounds - seconds_device_wait) / rounds is the host's
   * own work per round. */
  double seconds_rounds;
  double seconds_device_wait;
  /* Appended: 1 when each round ran whole on the device, one CUDA graph a round (greedy or
   * plain temperature rounds with the plan's GPU drafter; two graphs under --budget auto, the
   * proposal's time in seconds_draft; env KPLAN_DEVICE_ROUNDS=0 turns it off): the round's time
   * is then in seconds_verify. */
  int32_t device_rounds;
  /* Appended: why the decode ended (kplan_stop_reason). */
  int32_t stop_reason;
} kplan_generate_stats;

typedef enum kplan_stop_reason {
  KPLAN_STOP_MAX_NEW = 0,      /* max_new tokens emitted */
  KPLAN_STOP_EOS = 1,          /* one of the model's EOS ids emitted (stop_at_eos) */
  KPLAN_STOP_STRING = 2,       /* the output's text completed one of stop_strings */
  KPLAN_STOP_CONTEXT = 3,      /* the KV cache filled */
  KPLAN_STOP_CALLBACK = 4,     /* on_token asked to stop */
} kplan_stop_reason;

/* Resets the session, prefills the prompt (in chunks of the largest step) and decodes: the new
 * tokens (EOS included when it ended the decode) go to out_tokens (room for `capacity`, at least
 * max_new), their count to *n_tokens. `options` may be NULL (greedy AR, 16 tokens); `stats` may
 * be NULL. Bad input (an empty prompt, ids outside the vocabulary, a prompt longer than the
 * context, budget < 1 for DDTree, a speculative mode without a drafter) is KPLAN_STATUS_ERROR. */
kplan_status kplan_session_generate(kplan_session* session, const int32_t* prompt, int32_t n_prompt,
                                    const kplan_generate_options* options, int32_t* out_tokens, int32_t capacity,
                                    int32_t* n_tokens, kplan_generate_stats* stats);

/* Greedy AR generation without EOS: kplan_session_generate's shorthand for exactly n_new tokens. */
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
  double load_seconds;       /* model load + session creation */
  /* Appended: the routed experts the step's tokens chose (counted from the device's router
   * outputs in one extra run of the step): distinct experts per MoE layer, mean and largest over
   * the layers; 0 when the model has no MoE layer. */
  int32_t moe_layers;
  double routed_experts_mean;
  int32_t routed_experts_max;
} kplan_bench_result;

/* Times `steps` replays of the 1-token decode bucket after prefilling `context` positions. */
kplan_status kplan_session_bench_decode(kplan_session* session, int32_t steps, int64_t context,
                                        kplan_bench_result* out);
/* The same for the bucket of `tokens` tokens (a tree verify or prefill step: causal mask). */
kplan_status kplan_session_bench_step(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                      kplan_bench_result* out);
/* One launch of a timed step (kplan_session_bench_kernels). The strings live as long as the model. */
typedef struct kplan_kernel_time {
  int32_t launch;           /* index in the bucket's launch sequence */
  const char* kernel;       /* the kernel instance's readable id */
  const char* family;       /* its kernel family */
  const char* note;         /* the IR op(s) it implements */
  double ms_median;         /* GPU time between the events around it, median over the runs */
  double weight_bytes;      /* weights it reads: the matmul families' exactly, routed experts by the share
                               the step's tokens chose (counted on the device), others whole */
  double activation_bytes;  /* activations it reads and writes, KV cache rows up to context + tokens */
} kplan_kernel_time;

/* Times each launch of the `tokens`-token target bucket on its own: `steps` runs of the step as
 * plain launches with an event between every two (after prefilling `context` positions); each
 * launch's median time and bytes go to out[0 .. min(capacity, launches)), the bucket's launch
 * count to *n_launches (capacity 0 asks for the count only, after the timed runs). */
kplan_status kplan_session_bench_kernels(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                         kplan_kernel_time* out, int32_t capacity, int32_t* n_launches);
/* Each launch's marginal time inside the `tokens`-token target bucket's CUDA graph (after
 * prefilling `context` positions): graphs of the bucket's first k launches, k = 1 .. all, each
 * replayed `steps` times; launch i's figure (ms, to ms_out[i] for i < capacity) is the median replay
 * of its prefix less that of the prefix before it, so it keeps its programmatic dependent launch
 * overlap with its predecessor (what dropping it from the step would save). *n_launches gets the
 * bucket's launch count. */
kplan_status kplan_session_bench_graph_prefixes(kplan_session* session, int32_t tokens, int32_t steps, int64_t context,
                                                double* ms_out, int32_t capacity, int32_t* n_launches);
/* The token counts of the plan's target buckets, ascending; returns how many (at most `capacity`
 * written). */
int32_t kplan_plan_buckets_get(const kplan_plan* plan, int32_t* tokens, int32_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* KPLAN_KPLAN_H_ */
