// kplan serve MODEL: an OpenAI-compatible HTTP server (cpp-httplib) over one loaded model.
//
//   POST /v1/completions        text completion (prompt: a string or token ids)
//   POST /v1/chat/completions   chat (messages rendered with the model's chat template)
//        both non-streaming (one JSON object) or `"stream": true` (server-sent events: one
//        `data: {chunk}` per piece of text, a last chunk with finish_reason, `data: [DONE]`)
//   GET  /v1/models             the one model served
//   GET  /health                200 {"status": "ok", ...} once the model is loaded
//   GET  /metrics               Prometheus text: requests, tokens, tokens/s, acceptance, queue
// Request fields: serve_request.h. Errors are OpenAI's error object ({"error": {"message",
// "type", "param", "code"}}) with the status: 400 a bad field (named), 401 a missing or wrong API
// key (--api-key), 404 an unknown model or path, 413 a body over --max-body-bytes, 503 more than
// --max-queue requests waiting, 500 a failed decode.
//
// Concurrency: the model is loaded once (kplan_model, the weights uploaded once) with one
// kplan_session; HTTP connections are served by a thread pool (--threads), and decoding is
// serialised by one mutex: one request decodes at a time on the device, the others wait for it
// in the queue (/metrics kplan_queue_depth). Health, models and metrics answer while a decode
// runs. SIGINT / SIGTERM stop the server cleanly (exit 0).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "kplan/kplan.h"
#include "tools/kplan/api_handles.h"
#include "tools/kplan/commands.h"
#include "tools/kplan/model_source.h"
#include "tools/kplan/number_list.h"
#include "tools/kplan/timed_generate.h"
#include "tools/kplan/serve_request.h"
#include "tools/kplan/text_assembler.h"

namespace kplan::cli {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct ServeArgs {
  std::string model, draft_dir, device = "auto";
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string served_name;  // default: MODEL's file or directory name
  std::string spec = "auto";
  std::string budget = "16";
  std::string api_key;
  int64_t max_context = 0;
  int64_t max_body_bytes = 1 << 20;
  int max_queue = 64;
  int threads = 8;
  bool quiet = false;
};

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json error_body(const std::string& message, const std::string& type, const std::string& param, const char* code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? Json(nullptr) : Json(param)},
            {"code", code ? Json(code) : Json(nullptr)}}}};
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& type = "invalid_request_error",
                const std::string& param = "", const char* code = nullptr) {
  res.status = status;
  res.set_content(dump(error_body(message, type, param, code)), "application/json");
}

const char* finish_reason(int32_t stop) {
  return stop == KPLAN_STOP_EOS || stop == KPLAN_STOP_STRING ? "stop" : "length";
}

class Server {
 public:
  explicit Server(const ServeArgs& args) : args_(args) {}

  void run() {
    const ModelSource source = resolve_source(args_.model, args_.draft_dir, args_.device);
    if (!args_.quiet) std::fprintf(stderr, "kplan serve: loading %s\n", source.model.c_str());
    {
      Phase phase("kplan serve", open_phase_text(source), args_.quiet, open_phase_unit(source));
      plan_ = open_model_plan(source, &phase);
      phase.done();
    }
    const kplan_plan_info info = plan_info(plan_.get());
    if (args_.max_context > 0 && info.max_context > 0 && args_.max_context > info.max_context)
      throw UsageError("--max-context " + std::to_string(args_.max_context) + " is past the plan's context of " +
                       std::to_string(info.max_context) + " positions");
    {
      Phase phase("kplan serve", "loading the model (" + progress::format_bytes(static_cast<double>(info.weight_bytes)) + " of weights)", args_.quiet);
      model_ = create_model(plan_.get(), device_kind(args_.device), &Phase::progress_callback, &phase);
      phase.done();
    }
    kplan_session_options so;
    kplan_session_options_init(&so);
    so.max_context = args_.max_context;
    session_ = create_session(model_.get(), so);
    device_ = describe_device(session_.get(), source);

    config_.model_name = args_.served_name.empty() ? default_name(source.model) : args_.served_name;
    config_.has_drafter = info.has_drafter != 0;
    config_.has_tokenizer = info.has_tokenizer != 0;
    config_.context = kplan_session_max_context(session_.get());
    config_.vocab_size = info.vocab_size;
    if (args_.spec == "auto") config_.default_spec = config_.has_drafter ? KPLAN_SPEC_DDTREE : KPLAN_SPEC_NONE;
    else if (args_.spec == "none") config_.default_spec = KPLAN_SPEC_NONE;
    else if (!config_.has_drafter)
      throw UsageError("--spec " + args_.spec + " needs a drafter: compile the plan with --draft DIR, or give --draft DIR");
    else config_.default_spec = args_.spec == "dflash" ? KPLAN_SPEC_DFLASH : KPLAN_SPEC_DDTREE;
    config_.default_budget = parse_budget(args_.budget, "--budget");
    eos_.resize(64);
    eos_.resize(static_cast<size_t>(std::min(64, kplan_plan_eos_ids_get(plan_.get(), eos_.data(), 64))));
    created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();

    httplib::Server svr;
    const int threads = args_.threads;
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    svr.set_payload_max_length(static_cast<size_t>(args_.max_body_bytes));
    svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (args_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + args_.api_key)
        return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, 401, "a valid API key is required: send 'Authorization: Bearer KEY'", "authentication_error", "",
                 "invalid_api_key");
      return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 404)
        send_error(res, 404, "no route " + req.method + " " + req.path +
                                 " (kplan serves POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
                                 "GET /health, GET /metrics)",
                   "invalid_request_error", "", "not_found");
      else if (res.status == 413)
        send_error(res, 413, "the request body is larger than the server's limit (--max-body-bytes)",
                   "invalid_request_error", "", "payload_too_large");
      else
        send_error(res, res.status, "HTTP status " + std::to_string(res.status), "invalid_request_error");
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = std::string("internal error: ") + e.what();
      } catch (...) {
      }
      send_error(res, 500, what, "server_error");
    });
    svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump({{"status", "ok"}, {"model", config_.model_name}, {"device", device_}}), "application/json");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(dump({{"object", "list"},
                            {"data",
                             {{{"id", config_.model_name},
                               {"object", "model"},
                               {"created", created_},
                               {"owned_by", "kplan"},
                               {"max_model_len", config_.context}}}}}),
                      "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    svr.Post("/v1/completions",
             [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, /*chat=*/false); });
    svr.Post("/v1/chat/completions",
             [this](const httplib::Request& req, httplib::Response& res) { handle(req, res, /*chat=*/true); });

    const int port = args_.port == 0 ? svr.bind_to_any_port(args_.host) : (svr.bind_to_port(args_.host, args_.port) ? args_.port : -1);
    if (port < 0) throw Error("cannot listen on " + args_.host + ":" + std::to_string(args_.port) + " (in use, or not an address here)");
    // SIGINT / SIGTERM stop the server from a thread of their own (the pool's threads inherit the mask).
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::atomic<bool> signalled{false};
    std::thread stopper([&svr, &signalled, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      signalled = true;
      svr.stop();
    });
    std::fprintf(stderr, "kplan serve: listening on http://%s:%d (model '%s', device %s, context %lld, spec %s)\n",
                 args_.host.c_str(), port, config_.model_name.c_str(), device_.c_str(),
                 static_cast<long long>(config_.context),
                 config_.default_spec == KPLAN_SPEC_NONE ? "none" : config_.default_spec == KPLAN_SPEC_DFLASH ? "dflash" : "ddtree");
    std::fflush(stderr);
    svr.listen_after_bind();
    if (!signalled) pthread_kill(stopper.native_handle(), SIGTERM);  // the listen ended otherwise: end the stopper
    stopper.join();
    if (!args_.quiet) std::fprintf(stderr, "kplan serve: stopped after %lld requests\n", static_cast<long long>(requests_.load()));
  }

 private:
  static std::string default_name(const std::string& model) {
    fs::path p(model);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();
    std::string name = p.filename().string();
    if (p.extension() == ".kplan") name = p.stem().string();
    return name.empty() ? "kplan" : name;
  }

  struct Outcome {
    std::vector<int32_t> tokens;
    kplan_generate_stats stats{};
    double seconds = 0;
  };

  // Decodes under the server's one mutex; `on_token` (may be null) is called per token.
  Outcome decode(const ServeRequest& r, std::function<bool(int32_t)> on_token) {
    // pending_: the request decoding and those waiting for it; at most --max-queue may wait.
    if (++pending_ > args_.max_queue + 1) {
      --pending_;
      throw HttpError(503, "server_error", "", "the server is busy: a decode is running and " +
                                                   std::to_string(args_.max_queue) +
                                                   " requests wait for it (--max-queue); retry later");
    }
    struct Release {
      std::atomic<int>& n;
      ~Release() { --n; }
    } release{pending_};
    ++waiting_;
    std::unique_lock<std::mutex> lock(decode_mutex_);
    --waiting_;
    kplan_generate_options g = r.options;
    std::vector<const char*> stops;
    for (const std::string& s : r.stops) stops.push_back(s.c_str());
    g.stop_strings = stops.empty() ? nullptr : stops.data();
    g.n_stop_strings = static_cast<int32_t>(stops.size());
    struct Ctx {
      std::function<bool(int32_t)>* f;
    } ctx{&on_token};
    if (on_token) {
      g.on_token = [](void* user, int32_t token) -> int32_t { return (*static_cast<Ctx*>(user)->f)(token) ? 0 : 1; };
      g.on_token_user_data = &ctx;
    }
    Outcome o;
    o.tokens.resize(static_cast<size_t>(g.max_new));
    o.stats.struct_size = sizeof(o.stats);
    int32_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const kplan_status s = kplan_session_generate(session_.get(), r.prompt.data(), static_cast<int32_t>(r.prompt.size()),
                                                  &g, o.tokens.data(), g.max_new, &n, &o.stats);
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s != KPLAN_STATUS_OK) {
      ++failed_;
      throw HttpError(500, "server_error", "", std::string("the decode failed: ") + kplan_error_last());
    }
    o.tokens.resize(static_cast<size_t>(n));
    tokens_out_ += o.stats.generated_tokens;
    tokens_in_ += o.stats.prompt_tokens;
    rounds_ += o.stats.rounds;
    committed_ += o.stats.committed_in_rounds;
    {
      std::lock_guard<std::mutex> m(metrics_mutex_);
      decode_seconds_ += o.seconds;
    }
    return o;
  }

  Json usage(const Outcome& o) const {
    return {{"prompt_tokens", o.stats.prompt_tokens},
            {"completion_tokens", o.stats.generated_tokens},
            {"total_tokens", o.stats.prompt_tokens + o.stats.generated_tokens}};
  }

  Json kplan_fields(const ServeRequest& r, const Outcome& o) const {
    return {{"spec", r.spec_name},
            {"seed", r.options.seed},
            {"tokens", o.tokens},
            {"rounds", o.stats.rounds},
            {"mean_acceptance_length", o.stats.mean_acceptance_length},
            {"seconds", o.seconds}};
  }

  std::string next_id(bool chat) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s-%08llx%04x", chat ? "chatcmpl" : "cmpl",
                  static_cast<unsigned long long>(++ids_), static_cast<unsigned>(created_ & 0xffff));
    return buf;
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    ++requests_;
    ServeRequest r;
    try {
      r = parse_serve_request(req.body, chat, plan_.get(), config_);
    } catch (const HttpError& e) {
      ++failed_;
      send_error(res, e.status, e.what(), e.type, e.param, e.status == 404 ? "model_not_found" : nullptr);
      return;
    }
    const std::string id = next_id(chat);
    const int64_t created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto chunk = [this, id, created, chat](const Json& choice) {
      return Json{{"id", id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", config_.model_name},
                  {"system_fingerprint", std::string("kplan-") + kplan_version()},
                  {"choices", Json::array({choice})}};
    };
    if (!r.stream) {
      Outcome o;
      TextAssembler text(plan_.get(), config_.has_tokenizer, eos_, r.options.stop_at_eos != 0, r.stops);
      try {
        o = decode(r, nullptr);
      } catch (const HttpError& e) {
        send_error(res, e.status, e.what(), e.type, e.param, e.status == 503 ? "server_busy" : nullptr);
        return;
      }
      for (int32_t t : o.tokens) text.push(t);
      Json choice = {{"index", 0}};
      if (chat) choice["message"] = {{"role", "assistant"}, {"content", text.text()}};
      else {
        choice["text"] = text.text();
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = finish_reason(o.stats.stop_reason);
      Json body = chunk(choice);
      body["object"] = chat ? "chat.completion" : "text_completion";
      body["usage"] = usage(o);
      body["kplan"] = kplan_fields(r, o);
      res.set_content(dump(body), "application/json");
      return;
    }
    // Server-sent events: the decode runs when httplib asks for the body, on this connection's thread.
    auto request = std::make_shared<ServeRequest>(std::move(r));
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [this, request, chunk, chat](size_t, httplib::DataSink& sink) {
      auto send = [&sink](const Json& j) {
        const std::string event = "data: " + dump(j) + "\n\n";
        return sink.write(event.data(), event.size());
      };
      auto piece_choice = [chat](const std::string& piece) {
        Json c = {{"index", 0}};
        if (chat) c["delta"] = {{"content", piece}};
        else {
          c["text"] = piece;
          c["logprobs"] = nullptr;
        }
        c["finish_reason"] = nullptr;
        return c;
      };
      bool open = true;
      if (chat) open = send(chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"finish_reason", nullptr}}));
      TextAssembler text(plan_.get(), config_.has_tokenizer, eos_, request->options.stop_at_eos != 0, request->stops);
      try {
        const Outcome o = decode(*request, [&](int32_t token) {
          text.push(token);
          const std::string piece = text.take(false);
          if (!piece.empty() && open) open = send(chunk(piece_choice(piece)));
          return open;  // a closed connection stops the decode
        });
        if (open) {
          const std::string rest = text.take(true);
          if (!rest.empty()) open = send(chunk(piece_choice(rest)));
        }
        if (open) {
          Json last = {{"index", 0}};
          if (chat) last["delta"] = Json::object();
          else {
            last["text"] = "";
            last["logprobs"] = nullptr;
          }
          last["finish_reason"] = finish_reason(o.stats.stop_reason);
          Json c = chunk(last);
          c["kplan"] = kplan_fields(*request, o);
          open = send(c);
          if (open && request->include_usage) {
            Json u = chunk(Json());
            u["choices"] = Json::array();
            u["usage"] = usage(o);
            open = send(u);
          }
        }
      } catch (const HttpError& e) {
        if (open) open = send(error_body(e.what(), e.type, e.param, nullptr));
      }
      if (open) {
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
      }
      sink.done();
      return true;
    });
  }

  std::string metrics_text() {
    double seconds;
    {
      std::lock_guard<std::mutex> m(metrics_mutex_);
      seconds = decode_seconds_;
    }
    const int64_t out = tokens_out_.load(), rounds = rounds_.load();
    std::string t;
    auto metric = [&t](const char* name, const char* type, const char* help, const std::string& value) {
      t += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + value + "\n";
    };
    metric("kplan_requests_total", "counter", "Completion requests received.", std::to_string(requests_.load()));
    metric("kplan_requests_failed_total", "counter", "Requests refused or failed.", std::to_string(failed_.load()));
    metric("kplan_prompt_tokens_total", "counter", "Prompt tokens decoded.", std::to_string(tokens_in_.load()));
    metric("kplan_generation_tokens_total", "counter", "Tokens generated.", std::to_string(out));
    metric("kplan_decode_seconds_total", "counter", "Wall seconds spent decoding.", std::to_string(seconds));
    metric("kplan_tokens_per_second", "gauge", "Generated tokens over decode seconds, all requests.",
           std::to_string(seconds > 0 ? static_cast<double>(out) / seconds : 0.0));
    metric("kplan_mean_acceptance_length", "gauge", "Tokens committed per target forward after prefill (1 for AR).",
           std::to_string(rounds > 0 ? static_cast<double>(committed_.load()) / static_cast<double>(rounds) : 0.0));
    metric("kplan_queue_depth", "gauge", "Requests waiting for the decoder.", std::to_string(waiting_.load()));
    return t;
  }

  const ServeArgs& args_;
  PlanPtr plan_;
  ModelPtr model_;
  SessionPtr session_;
  ServeConfig config_;
  std::string device_;
  std::vector<int64_t> eos_;
  int64_t created_ = 0;
  std::mutex decode_mutex_, metrics_mutex_;
  std::atomic<int> waiting_{0}, pending_{0};
  std::atomic<int64_t> requests_{0}, failed_{0}, tokens_in_{0}, tokens_out_{0}, rounds_{0}, committed_{0}, ids_{0};
  double decode_seconds_ = 0;
};

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions "
                                          "(stream: true as server-sent events), /v1/models, /health, /metrics");
  cmd->add_option("model", args->model, "Compiled .kplan plan or checkpoint directory (as `kplan run` takes it)")
      ->required();
  cmd->add_option("--draft", args->draft_dir, "DFlash drafter checkpoint directory (with a checkpoint directory)");
  cmd->add_option("--device", args->device, "cpu, gpu or auto")->check(CLI::IsMember({"cpu", "gpu", "auto"}));
  cmd->add_option("--host", args->host, "Address to listen on (0.0.0.0: every interface)");
  cmd->add_option("--port", args->port, "TCP port (0: a free one, printed on stderr)")->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", args->served_name,
                  "The model's name in /v1/models and requests (default: MODEL's file or directory name)");
  cmd->add_option("--spec", args->spec,
                  "Requests' default decoding (a request's \"spec\" overrides it): auto = ddtree when the model has a "
                  "drafter, else none")
      ->check(CLI::IsMember({"auto", "none", "dflash", "ddtree"}));
  cmd->add_option("--budget", args->budget, "Requests' default DDTree budget (an integer, or auto)")->capture_default_str();
  cmd->add_option("--api-key", args->api_key,
                  "Require 'Authorization: Bearer KEY' on /v1/ routes (default: none; also $KPLAN_API_KEY)")
      ->envname("KPLAN_API_KEY");
  cmd->add_option("--max-context", args->max_context, "KV cache positions, at most the plan's (0: the plan's)");
  cmd->add_option("--max-body-bytes", args->max_body_bytes, "Largest request body (larger: 413)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  cmd->add_option("--max-queue", args->max_queue, "Requests that may wait for the decoder (more: 503)")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--threads", args->threads, "HTTP worker threads (connections served at once)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("-q,--quiet", args->quiet, "Only the listening line on stderr");
  cmd->callback([args] {
    Server server(*args);
    server.run();
  });
}

}  // namespace kplan::cli
