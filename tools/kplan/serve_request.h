#pragma once
// `kplan serve`'s requests: an OpenAI /v1/completions or /v1/chat/completions body checked field
// by field (a wrong type or value is an HttpError naming the field, answered 400 with OpenAI's
// error object) and mapped to the C API's kplan_generate_options; the prompt tokenized (a chat's
// messages rendered with the plan's chat template first).
//
// Fields read (others are ignored, as OpenAI clients send many):
//   completions  prompt (a string, a list of token ids, or a list of one of either), echo (false),
//                suffix (null), best_of (1)
//   chat         messages (rendered by kplan_chat_template_apply), tools (passed to the template)
//   both         model (the served name, else 404), max_tokens / max_completion_tokens (completions
//                16, chat: the rest of the context), temperature (1), top_p (1), top_k (0 or -1: off),
//                min_p (0), repetition_penalty (1), frequency_penalty (0), presence_penalty (0),
//                stop (a string or a list), seed (random), n (1), stream (false),
//                stream_options.include_usage, logprobs (null / false / 0), logit_bias (empty);
//                kplan's own: spec ("none" | "dflash" | "ddtree"; default the server's), budget (an
//                integer >= 1 or "auto"), ignore_eos (false).
#include <cstdint>
#include <string>
#include <vector>

#include "ir/support/error.h"
#include "kplan/kplan.h"

namespace kplan::cli {

// A refusal: HTTP status, OpenAI error type and the request field it is about ("" for none).
struct HttpError : Error {
  HttpError(int status, std::string type, std::string param, const std::string& message)
      : Error(message), status(status), type(std::move(type)), param(std::move(param)) {}
  int status;
  std::string type, param;
};

struct ServeConfig {
  std::string model_name;           // what /v1/models lists and requests may name
  kplan_spec_mode default_spec = KPLAN_SPEC_NONE;
  int32_t default_budget = 16;
  bool has_drafter = false, has_tokenizer = false;
  int64_t context = 0;              // the session's KV cache positions
  int64_t vocab_size = 0;
};

struct ServeRequest {
  bool chat = false, stream = false, include_usage = false;
  std::vector<int32_t> prompt;
  kplan_generate_options options{};  // stop_strings left null: see `stops`
  std::vector<std::string> stops;
  std::string spec_name;             // "none", "dflash", "ddtree"
};

// Parses and checks a request body; throws HttpError.
ServeRequest parse_serve_request(const std::string& body, bool chat, const kplan_plan* plan, const ServeConfig& config);

}  // namespace kplan::cli
