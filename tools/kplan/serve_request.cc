#include "tools/kplan/serve_request.h"

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "tools/kplan/model_source.h"

namespace kplan::cli {
namespace {

using Json = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw HttpError(400, "invalid_request_error", param, message);
}

bool present(const Json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

int64_t integer_field(const Json& body, const char* key, int64_t def) {
  if (!present(body, key)) return def;
  const Json& v = body[key];
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() &&
                                   std::fabs(v.get<double>()) < 9e15))
    bad(key, std::string("'") + key + "' must be an integer");
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
}

double number_field(const Json& body, const char* key, double def) {
  if (!present(body, key)) return def;
  const Json& v = body[key];
  if (!v.is_number()) bad(key, std::string("'") + key + "' must be a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) bad(key, std::string("'") + key + "' must be finite");
  return d;
}

bool bool_field(const Json& body, const char* key, bool def) {
  if (!present(body, key)) return def;
  if (!body[key].is_boolean()) bad(key, std::string("'") + key + "' must be true or false");
  return body[key].get<bool>();
}

std::vector<int32_t> token_list(const Json& v, const ServeConfig& config, const std::string& param) {
  std::vector<int32_t> ids;
  for (const Json& t : v) {
    if (!t.is_number_integer()) bad(param, "'" + param + "' must be a string or a list of token ids (integers)");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= config.vocab_size)
      bad(param, "'" + param + "': token id " + std::to_string(id) + " is outside the vocabulary of " +
                     std::to_string(config.vocab_size));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<int32_t> encode(const kplan_plan* plan, const std::string& text, const ServeConfig& config,
                            const std::string& param) {
  if (!config.has_tokenizer)
    bad(param, "'" + param + "': the model has no tokenizer; give the prompt as a list of token ids");
  try {
    return encode_text(plan, text);
  } catch (const Error& e) {
    bad(param, "'" + param + "': " + e.what());
  }
}

}  // namespace

ServeRequest parse_serve_request(const std::string& text, bool chat, const kplan_plan* plan, const ServeConfig& config) {
  Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) bad("", "the request body is not valid JSON");
  if (!body.is_object()) bad("", "the request body must be a JSON object");
  ServeRequest r;
  r.chat = chat;
  if (present(body, "model")) {
    if (!body["model"].is_string()) bad("model", "'model' must be a string");
    if (body["model"] != config.model_name)
      throw HttpError(404, "invalid_request_error", "model",
                      "The model '" + body["model"].get<std::string>() + "' does not exist; this server serves '" +
                          config.model_name + "' (GET /v1/models)");
  }
  if (integer_field(body, "n", 1) != 1) bad("n", "'n' must be 1 (kplan makes one choice per request)");
  if (integer_field(body, "best_of", 1) != 1) bad("best_of", "'best_of' must be 1");
  if (present(body, "logprobs") && !(body["logprobs"].is_boolean() && !body["logprobs"].get<bool>()) &&
      !(body["logprobs"].is_number_integer() && body["logprobs"].get<int64_t>() == 0))
    bad("logprobs", "'logprobs' is not supported (leave it out or null)");
  if (present(body, "logit_bias") && !(body["logit_bias"].is_object() && body["logit_bias"].empty()))
    bad("logit_bias", "'logit_bias' is not supported (leave it out)");
  r.stream = bool_field(body, "stream", false);
  if (present(body, "stream_options")) {
    if (!body["stream_options"].is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' needs 'stream': true");
    r.include_usage = bool_field(body["stream_options"], "include_usage", false);
  }

  // The prompt.
  if (chat) {
    if (!body.contains("messages")) bad("messages", "'messages' is required");
    const Json& m = body["messages"];
    if (!m.is_array() || m.empty()) bad("messages", "'messages' must be a non-empty list of message objects");
    if (!config.has_tokenizer) bad("messages", "the model has no tokenizer, so no chat template: use /v1/completions");
    Json conv = {{"messages", m}};
    if (present(body, "tools")) {
      if (!body["tools"].is_array()) bad("tools", "'tools' must be a list");
      conv["tools"] = body["tools"];
    }
    std::string rendered;
    try {
      rendered = render_chat(plan, conv.dump(), true, "");
    } catch (const Error& e) {
      const std::string msg = e.what();
      // kplan_chat_template_apply names the field: "messages[1].role: ...".
      const std::string param = msg.rfind("messages", 0) == 0 ? msg.substr(0, msg.find(':')) : "messages";
      bad(param, msg);
    }
    r.prompt = encode(plan, rendered, config, "messages");
  } else {
    if (!body.contains("prompt")) bad("prompt", "'prompt' is required");
    const Json& p = body["prompt"];
    if (p.is_string()) {
      r.prompt = encode(plan, p.get<std::string>(), config, "prompt");
    } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
      r.prompt = encode(plan, p[0].get<std::string>(), config, "prompt");
    } else if (p.is_array() && p.size() == 1 && p[0].is_array()) {
      r.prompt = token_list(p[0], config, "prompt");
    } else if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
      bad("prompt", "'prompt' holds several prompts; kplan answers one per request");
    } else if (p.is_array()) {
      r.prompt = token_list(p, config, "prompt");
    } else {
      bad("prompt", "'prompt' must be a string or a list of token ids");
    }
    if (bool_field(body, "echo", false)) bad("echo", "'echo' is not supported (leave it out or false)");
    if (present(body, "suffix")) bad("suffix", "'suffix' is not supported (leave it out or null)");
  }
  if (r.prompt.empty()) bad(chat ? "messages" : "prompt", std::string("'") + (chat ? "messages" : "prompt") +
                                                             "' gives an empty prompt");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  if (n_prompt > config.context)
    bad(chat ? "messages" : "prompt", "the prompt has " + std::to_string(n_prompt) +
                                          " tokens, more than the model's context of " + std::to_string(config.context));

  // Generation options.
  kplan_generate_options& g = r.options;
  kplan_generate_options_init(&g);
  const int64_t room = config.context - n_prompt + 1;  // prompt + max_tokens - 1 cache positions
  const char* max_key = present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const int64_t max_tokens = integer_field(body, max_key, chat ? room : 16);
  if (max_tokens < 1) bad(max_key, std::string("'") + max_key + "' must be at least 1");
  if (max_tokens > room)
    bad(max_key, std::string("'") + max_key + "' " + std::to_string(max_tokens) + " does not fit: the prompt's " +
                     std::to_string(n_prompt) + " tokens and " + std::to_string(max_tokens) + " new ones need " +
                     std::to_string(n_prompt + max_tokens - 1) + " of the context's " + std::to_string(config.context) +
                     " positions (at most " + std::to_string(room) + ")");
  g.max_new = static_cast<int32_t>(max_tokens);
  g.temperature = number_field(body, "temperature", 1.0);
  if (g.temperature < 0) bad("temperature", "'temperature' must not be negative");
  g.top_p = number_field(body, "top_p", 1.0);
  if (!(g.top_p > 0 && g.top_p <= 1)) bad("top_p", "'top_p' must be within (0, 1]");
  const int64_t top_k = integer_field(body, "top_k", 0);
  if (top_k < -1) bad("top_k", "'top_k' must be -1 or 0 (off) or a positive integer");
  g.top_k = top_k <= 0 ? 0 : static_cast<int32_t>(std::min<int64_t>(top_k, INT32_MAX));
  g.min_p = number_field(body, "min_p", 0.0);
  if (!(g.min_p >= 0 && g.min_p <= 1)) bad("min_p", "'min_p' must be within [0, 1]");
  g.repetition_penalty = number_field(body, "repetition_penalty", 1.0);
  if (!(g.repetition_penalty > 0)) bad("repetition_penalty", "'repetition_penalty' must be > 0");
  g.frequency_penalty = number_field(body, "frequency_penalty", 0.0);
  g.presence_penalty = number_field(body, "presence_penalty", 0.0);
  if (present(body, "seed")) {
    if (!body["seed"].is_number_integer()) bad("seed", "'seed' must be an integer");
    g.seed = body["seed"].is_number_unsigned() ? body["seed"].get<uint64_t>()
                                               : static_cast<uint64_t>(body["seed"].get<int64_t>());
  } else {
    g.seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  }
  g.stop_at_eos = bool_field(body, "ignore_eos", false) ? 0 : 1;
  if (present(body, "stop")) {
    const Json& s = body["stop"];
    if (s.is_string()) {
      r.stops.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const Json& x : s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or a list of strings");
        r.stops.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or a list of strings");
    }
    for (const std::string& x : r.stops)
      if (x.empty()) bad("stop", "'stop' strings must not be empty");
    if (!r.stops.empty() && !config.has_tokenizer) bad("stop", "'stop' needs the model's tokenizer, which it has not");
  }
  // kplan's own fields.
  g.spec = config.default_spec;
  if (present(body, "spec")) {
    const Json& s = body["spec"];
    if (!s.is_string() || (s != "none" && s != "dflash" && s != "ddtree"))
      bad("spec", "'spec' must be \"none\", \"dflash\" or \"ddtree\"");
    g.spec = s == "none" ? KPLAN_SPEC_NONE : s == "dflash" ? KPLAN_SPEC_DFLASH : KPLAN_SPEC_DDTREE;
  }
  if (g.spec != KPLAN_SPEC_NONE && !config.has_drafter)
    bad("spec", "'spec' " + std::string(g.spec == KPLAN_SPEC_DFLASH ? "dflash" : "ddtree") +
                    " needs a drafter: compile the plan with --draft DIR (or serve with --draft DIR)");
  r.spec_name = g.spec == KPLAN_SPEC_NONE ? "none" : g.spec == KPLAN_SPEC_DFLASH ? "dflash" : "ddtree";
  g.budget = config.default_budget;
  if (present(body, "budget")) {
    const Json& b = body["budget"];
    if (b.is_string() && b == "auto") g.budget = KPLAN_BUDGET_AUTO;
    else if (b.is_number_integer() && b.get<int64_t>() >= 1 && b.get<int64_t>() <= 4096) g.budget = b.get<int32_t>();
    else bad("budget", "'budget' must be an integer from 1 to 4096 or \"auto\"");
  }
  return r;
}

}  // namespace kplan::cli
