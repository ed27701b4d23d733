// `kplan serve` (issue 11 item 4) as a client sees it: the binary started on the bundled pair
// (models/mini-v3 with a chat template beside it, + models/mini-v3-dflash) on the CPU, on a free
// loopback port, and real HTTP requests through cpp-httplib's client: /health, /v1/models, greedy
// completions whose text and tokens are `kplan run`'s (AR and DDTree), chat completions whose
// prompt is the chat template's, server-sent events framed as OpenAI frames them (the pieces
// joining to the non-streamed text, a last chunk with finish_reason, `data: [DONE]`), stop
// strings, the errors (400 naming the field, 404, 413, 401 without the API key), a client that
// hangs up mid-stream, concurrent requests, /metrics, and a clean exit on SIGTERM.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using test::CliResult;

const fs::path kModels = fs::path(KPLAN_SOURCE_DIR) / "models";
const fs::path kTemplates = fs::path(KPLAN_TEST_DATA_DIR) / "chat_templates";

// One `kplan serve` process: started with ARGS on --port 0, its port read from the listening line.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& args, const fs::path& log) : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 2);
      ::dup2(fd, 1);
      std::vector<std::string> all = {KPLAN_BINARY, "serve"};
      all.insert(all.end(), args.begin(), args.end());
      for (const char* a : {"--host", "127.0.0.1", "--port", "0", "--device", "cpu"}) all.push_back(a);
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(KPLAN_BINARY, argv.data());
      ::_exit(127);
    }
    const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+))");
    for (int i = 0; i < 600 && port_ == 0; ++i) {  // 60 s at most: loading the bundled pair takes < 1 s
      std::smatch m;
      const std::string text = testing_util::read_file(log_);
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      int status = 0;
      if (port_ == 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int port() const { return port_; }
  std::string log() const { return testing_util::read_file(log_); }
  // SIGTERM, then the exit status (-1: still running after `seconds`, then killed).
  int terminate(double seconds) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < seconds * 20; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct Shared {
  testing_util::TempDir dir{"serve"};
  fs::path checkpoint;
  std::unique_ptr<ServerProcess> server;
};
Shared* g = nullptr;

class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g = new Shared;
    g->checkpoint = g->dir.path() / "mini";
    fs::create_directories(g->checkpoint);
    for (const char* f : {"config.json", "model.safetensors", "tiktoken.model", "tokenizer_config.json"})
      fs::create_symlink(kModels / "mini-v3" / f, g->checkpoint / f);
    fs::copy_file(kTemplates / "kimi-k2.jinja", g->checkpoint / "chat_template.jinja");
    g->server = std::make_unique<ServerProcess>(
        std::vector<std::string>{g->checkpoint.string(), "--draft", (kModels / "mini-v3-dflash").string(),
                                 "--served-model-name", "mini", "--max-body-bytes", "65536", "--threads", "6"},
        g->dir.path() / "serve.log");
  }
  static void TearDownTestSuite() {
    delete g;
    g = nullptr;
  }
  void SetUp() override { ASSERT_GT(g->server->port(), 0) << g->server->log(); }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", g->server->port());
    c.set_read_timeout(120, 0);
    return c;
  }
  static Json post(const std::string& path, const Json& body, int want_status = 200) {
    httplib::Client c = client();
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res) << "no response to " << path;
    if (!res) return {};
    EXPECT_EQ(res->status, want_status) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
    return Json::parse(res->body);
  }
  // The raw body of a streamed request.
  static std::string post_stream(const std::string& path, const Json& body) {
    httplib::Client c = client();
    auto res = c.Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return "";
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    return res->body;
  }
  // Server-sent events: every event is one `data: ...` line then a blank line; the last is [DONE].
  static std::vector<Json> events_of(const std::string& body) {
    std::vector<Json> events;
    size_t at = 0;
    bool done = false;
    while (at < body.size()) {
      const size_t end = body.find("\n\n", at);
      EXPECT_NE(end, std::string::npos) << "an event not ended by a blank line: " << body.substr(at);
      if (end == std::string::npos) break;
      const std::string event = body.substr(at, end - at);
      EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
      EXPECT_EQ(event.find('\n'), std::string::npos) << "one data line per event: " << event;
      EXPECT_FALSE(done) << "an event after [DONE]";
      if (event == "data: [DONE]") done = true;
      else events.push_back(Json::parse(event.substr(6)));
      at = end + 2;
    }
    EXPECT_TRUE(done) << "no data: [DONE] at the end";
    return events;
  }
  // `kplan run ...`: its ids line and its text (after "text: ", the final newline dropped).
  static std::pair<std::vector<int>, std::string> run(const std::string& args) {
    const CliResult r = test::run_kplan("run " + args + " --device cpu -q", g->dir.path());
    EXPECT_EQ(r.status, 0) << r.err;
    std::vector<int> ids;
    const size_t nl = r.out.find('\n');
    for (const std::string& f : test::fields_of(r.out.substr(0, nl))) ids.push_back(std::stoi(f));
    std::string text = r.out.substr(nl + 1);
    EXPECT_EQ(text.rfind("text: ", 0), 0u) << r.out;
    text = text.substr(6);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    return {ids, text};
  }
};

TEST_F(Serve, HealthAndModels) {
  httplib::Client c = client();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(Json::parse(health->body)["status"], "ok");
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  const Json m = Json::parse(models->body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], "mini");
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["max_model_len"], 2048);
}

TEST_F(Serve, GreedyCompletionsAreKplanRunsTextInEveryMode) {
  const std::string prompt = "def has_key(ch):";
  const auto [ids, text] = run(g->checkpoint.string() + " --prompt '" + prompt + "' --max-new 24 --ignore-eos");
  ASSERT_EQ(ids.size(), 24u);
  for (const char* spec : {"ddtree", "none", "dflash"}) {
    SCOPED_TRACE(spec);
    const Json r = post("/v1/completions", {{"model", "mini"}, {"prompt", prompt}, {"max_tokens", 24},
                                            {"temperature", 0}, {"ignore_eos", true}, {"spec", spec}});
    EXPECT_EQ(r["object"], "text_completion");
    EXPECT_EQ(r["model"], "mini");
    EXPECT_EQ(r["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    ASSERT_EQ(r["choices"].size(), 1u);
    EXPECT_EQ(r["choices"][0]["text"], text);
    EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r["kplan"]["tokens"].get<std::vector<int>>(), ids);
    EXPECT_EQ(r["kplan"]["spec"], spec);
    EXPECT_EQ(r["usage"]["completion_tokens"], 24);
    EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int>() + 24);
    if (std::string(spec) == "ddtree") EXPECT_GT(r["kplan"]["mean_acceptance_length"].get<double>(), 1.0);
  }
  // Token ids as the prompt, and a seeded sample repeats.
  const Json by_ids = post("/v1/completions", {{"prompt", ids}, {"max_tokens", 4}, {"temperature", 0}});
  EXPECT_EQ(by_ids["usage"]["prompt_tokens"], 24);
  const Json sampling = {{"prompt", prompt}, {"max_tokens", 12}, {"temperature", 0.9}, {"top_p", 0.95},
                         {"seed", 7}, {"ignore_eos", true}};
  EXPECT_EQ(post("/v1/completions", sampling)["choices"][0]["text"], post("/v1/completions", sampling)["choices"][0]["text"]);
  EXPECT_EQ(post("/v1/completions", sampling)["kplan"]["seed"], 7);
}

TEST_F(Serve, StreamedCompletionsJoinToTheSameText) {
  const Json body = {{"prompt", "def f(x):"}, {"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}};
  const Json whole = post("/v1/completions", body);
  Json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const std::vector<Json> events = events_of(post_stream("/v1/completions", streamed));
  ASSERT_GE(events.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "text_completion");
    EXPECT_EQ(events[i]["id"], events[0]["id"]);
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    text += events[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_GT(events.size(), 5u) << "the text comes in pieces";
  const Json& last = events[events.size() - 2];
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(last["kplan"]["tokens"], whole["kplan"]["tokens"]);
  EXPECT_EQ(text, whole["choices"][0]["text"].get<std::string>());
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"], whole["usage"]);
}

TEST_F(Serve, ChatCompletionsRenderTheTemplate) {
  const std::string user = "Write a function that doubles x.";
  const auto [ids, text] = run(g->checkpoint.string() + " --chat '" + user + "' --max-new 10 --ignore-eos");
  const Json body = {{"messages", {{{"role", "user"}, {"content", user}}}}, {"max_tokens", 10},
                     {"temperature", 0}, {"ignore_eos", true}};
  const Json r = post("/v1/chat/completions", body);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(r["choices"][0]["message"]["content"], text);
  EXPECT_EQ(r["kplan"]["tokens"].get<std::vector<int>>(), ids);
  Json streamed = body;
  streamed["stream"] = true;
  const std::vector<Json> events = events_of(post_stream("/v1/chat/completions", streamed));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["choices"][0]["delta"], (Json{{"role", "assistant"}, {"content", ""}}));
  std::string content;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    EXPECT_TRUE(events[i]["choices"][0]["finish_reason"].is_null());
    content += events[i]["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, text);
  EXPECT_EQ(events.back()["choices"][0]["delta"], Json::object());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
}

TEST_F(Serve, StopStringsCutTheText) {
  const Json body = {{"prompt", "def has_key(ch):"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string full = post("/v1/completions", body)["choices"][0]["text"];
  const std::string stop = full.substr(full.size() / 2, 3);
  Json cut = body;
  cut["stop"] = {"never-there", stop};
  const Json r = post("/v1/completions", cut);
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
  cut["stream"] = true;
  std::string text;
  for (const Json& e : events_of(post_stream("/v1/completions", cut))) text += e["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, full.substr(0, full.find(stop)));
}

TEST_F(Serve, BadRequestsAreAnsweredWithTheFieldNamed) {
  const struct {
    std::string path, body;
    int status;
    std::string param, message;
  } cases[] = {
      {"/v1/completions", "{\"prompt\": ", 400, "", "not valid JSON"},
      {"/v1/completions", "[1, 2]", 400, "", "must be a JSON object"},
      {"/v1/completions", "{}", 400, "prompt", "'prompt' is required"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "8"})", 400, "max_tokens", "'max_tokens' must be an integer"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 0})", 400, "max_tokens", "at least 1"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400, "max_tokens", "does not fit"},
      {"/v1/completions", R"({"prompt": "x", "temperature": -1})", 400, "temperature", "must not be negative"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 1.5})", 400, "top_p", "(0, 1]"},
      {"/v1/completions", R"({"prompt": "x", "stop": 3})", 400, "stop", "a string or a list of strings"},
      {"/v1/completions", R"({"prompt": "x", "n": 2})", 400, "n", "'n' must be 1"},
      {"/v1/completions", R"({"prompt": "x", "stream": "yes"})", 400, "stream", "true or false"},
      {"/v1/completions", R"({"prompt": "x", "spec": "fast"})", 400, "spec", "\"none\", \"dflash\" or \"ddtree\""},
      {"/v1/completions", R"({"prompt": [1, 99999]})", 400, "prompt", "outside the vocabulary"},
      {"/v1/completions", R"({"prompt": ["a", "b"]})", 400, "prompt", "several prompts"},
      {"/v1/completions", R"({"prompt": "x", "model": "gpt-4"})", 404, "model", "'gpt-4' does not exist"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "messages", "non-empty list"},
      {"/v1/chat/completions", R"({"messages": [{"content": "x"}]})", 400, "messages[0].role", "must be a string"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "messages",
       "unknown role: robot"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.body);
    httplib::Client cl = client();
    auto res = cl.Post(c.path.c_str(), c.body, "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, c.status);
    const Json e = Json::parse(res->body);
    ASSERT_TRUE(e.contains("error")) << res->body;
    EXPECT_EQ(e["error"]["type"], c.status == 404 ? "invalid_request_error" : "invalid_request_error");
    if (c.param.empty()) EXPECT_TRUE(e["error"]["param"].is_null());
    else EXPECT_EQ(e["error"]["param"], c.param);
    EXPECT_NE(e["error"]["message"].get<std::string>().find(c.message), std::string::npos) << e.dump();
  }
  httplib::Client cl = client();
  auto res = cl.Get("/v1/engines");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "not_found");
  // A body over --max-body-bytes (64 KiB here).
  res = cl.Post("/v1/completions", Json{{"prompt", std::string(100000, 'a')}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "payload_too_large");
}

// A raw connection streaming a long decode (2000 tokens), returned once its first event came: the
// decode is under way. -1 on failure.
int start_long_stream(int port, const std::string& auth = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  const std::string body = Json{{"prompt", "def f(x):"}, {"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true},
                                {"spec", "none"}}
                               .dump();
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth +
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return -1;
  std::string got;
  char buf[512];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return -1;
    got.append(buf, static_cast<size_t>(n));
  }
  return fd;
}

TEST_F(Serve, AClientHangingUpMidStreamStopsItsDecode) {
  const int fd = start_long_stream(g->server->port());
  ASSERT_GE(fd, 0);
  ::close(fd);
  // The server stops that decode (2000 tokens would take a while) and serves the next request.
  const auto t0 = std::chrono::steady_clock::now();
  const Json r = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}, {"temperature", 0}});
  EXPECT_EQ(r["usage"]["completion_tokens"], 2);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
}

TEST_F(Serve, ConcurrentRequestsAllComplete) {
  const Json body = {{"prompt", "def has_key(ch):"}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string want = post("/v1/completions", body)["choices"][0]["text"];
  std::vector<std::thread> threads;
  std::vector<std::string> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      httplib::Client c = client();
      Json b = body;
      if (i % 2) b["stream"] = true;
      auto res = c.Post("/v1/completions", b.dump(), "application/json");
      if (!res || res->status != 200) return;
      if (i % 2 == 0) {
        got[static_cast<size_t>(i)] = Json::parse(res->body)["choices"][0]["text"];
      } else {
        for (const Json& e : events_of(res->body)) got[static_cast<size_t>(i)] += e["choices"][0]["text"].get<std::string>();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::string& text : got) EXPECT_EQ(text, want);
  httplib::Client c = client();
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  for (const char* m : {"# TYPE kplan_requests_total counter", "kplan_generation_tokens_total ", "kplan_tokens_per_second ",
                        "kplan_mean_acceptance_length ", "kplan_queue_depth 0"})
    EXPECT_NE(metrics->body.find(m), std::string::npos) << m << " in\n" << metrics->body;
}

TEST_F(Serve, AnApiKeyGuardsTheV1RoutesAQueueLimitAndSigtermStopsCleanly) {
  // The bundled target without its chat template (a checkpoint that ships none), still named mini-v3.
  const fs::path plain = g->dir.path() / "plain" / "mini-v3";
  fs::create_directories(plain);
  for (const char* f : {"config.json", "model.safetensors", "tiktoken.model"})
    fs::create_symlink(kModels / "mini-v3" / f, plain / f);
  Json tokenizer_config = Json::parse(testing_util::read_file(kModels / "mini-v3" / "tokenizer_config.json"));
  tokenizer_config.erase("chat_template");
  std::ofstream(plain / "tokenizer_config.json") << tokenizer_config.dump(2);
  ServerProcess keyed({plain.string(), "--api-key", "s3cret", "--max-queue", "0", "-q"},
                      g->dir.path() / "keyed.log");
  ASSERT_GT(keyed.port(), 0) << keyed.log();
  httplib::Client c("127.0.0.1", keyed.port());
  auto res = c.Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "invalid_api_key");
  res = c.Get("/v1/models", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(Json::parse(res->body)["data"][0]["id"], "mini-v3");
  res = c.Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  // No chat template in the checkpoint: a clear 400.
  res = c.Post("/v1/chat/completions", {{"Authorization", "Bearer s3cret"}},
               R"({"messages": [{"role": "user", "content": "hi"}]})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(Json::parse(res->body)["error"]["message"].get<std::string>().find("no chat template"), std::string::npos);
  // --max-queue 0: while one request decodes, another is refused with 503 (and served after).
  const int fd = start_long_stream(keyed.port(), "Authorization: Bearer s3cret\r\n");
  ASSERT_GE(fd, 0);
  const std::string small = R"({"prompt": "x", "max_tokens": 2, "temperature": 0})";
  res = c.Post("/v1/completions", {{"Authorization", "Bearer s3cret"}}, small, "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(Json::parse(res->body)["error"]["code"], "server_busy");
  ::close(fd);
  bool served = false;
  for (int i = 0; i < 100 && !served; ++i) {  // the hung-up decode ends at its next token
    res = c.Post("/v1/completions", {{"Authorization", "Bearer s3cret"}}, small, "application/json");
    served = res && res->status == 200;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(served);
  EXPECT_EQ(keyed.terminate(10), 0) << keyed.log();
}

// The bundled pair ships a chat template (models/mini-v3/tokenizer_config.json, Kimi K2's turn
// markers): a plan compiled from the pair carries it, renders a two-message conversation as
// jinja2 renders it (the text below), and `kplan serve` on that plan streams a chat completion
// whose content is `kplan run --messages`'s text.
TEST(ServeBundledPair, APlanFromTheBundledPairServesAStreamedChatCompletion) {
  testing_util::TempDir dir("serve_bundled");
  const fs::path plan = dir.path() / "mini.kplan";
  const CliResult compiled = test::run_kplan("compile --model " + (kModels / "mini-v3").string() + " --draft " +
                                                 (kModels / "mini-v3-dflash").string() + " -o " + plan.string(),
                                             dir.path());
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  const Json messages = {{{"role", "system"}, {"content", "You are terse."}}, {{"role", "user"}, {"content", "def f(x):"}}};
  const fs::path conversation = dir.path() / "two.json";
  std::ofstream(conversation) << messages.dump();
  // tools/train/chat_template.jinja rendered by jinja2 3.1 (transformers' environment) for these two messages.
  const std::string rendered =
      "<|im_system|>system<|im_middle|>You are terse.<|im_end|><|im_user|>user<|im_middle|>def f(x):<|im_end|>"
      "<|im_assistant|>assistant<|im_middle|>";
  for (const fs::path& model : {plan, kModels / "mini-v3"}) {
    SCOPED_TRACE(model.string());
    const CliResult shown = test::run_kplan("run " + model.string() + " --messages " + conversation.string() + " --print-prompt",
                                            dir.path());
    ASSERT_EQ(shown.status, 0) << shown.err;
    EXPECT_EQ(shown.out, rendered + "\n");
  }
  // Without a system message the template opens with its default one.
  const CliResult one = test::run_kplan("run " + plan.string() + " --chat hi --print-prompt", dir.path());
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(one.out, "<|im_system|>system<|im_middle|>You are a helpful assistant.<|im_end|><|im_user|>user<|im_middle|>hi"
                     "<|im_end|><|im_assistant|>assistant<|im_middle|>\n");
  // The decode `kplan run` makes of that conversation: its text.
  const CliResult ran = test::run_kplan("run " + plan.string() + " --messages " + conversation.string() +
                                            " --max-new 12 --ignore-eos --device cpu -q",
                                        dir.path());
  ASSERT_EQ(ran.status, 0) << ran.err;
  const size_t at = ran.out.find("\ntext: ");
  ASSERT_NE(at, std::string::npos) << ran.out;
  std::string want = ran.out.substr(at + 7);
  if (!want.empty() && want.back() == '\n') want.pop_back();

  ServerProcess server({plan.string(), "-q"}, dir.path() / "serve.log");
  ASSERT_GT(server.port(), 0) << server.log();
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(120, 0);
  const Json body = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
  auto res = c.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  // Server-sent events: a role chunk, the content chunks, the finish chunk, data: [DONE].
  std::vector<Json> events;
  bool done = false;
  for (size_t pos = 0, end; pos < res->body.size() && (end = res->body.find("\n\n", pos)) != std::string::npos; pos = end + 2) {
    const std::string event = res->body.substr(pos, end - pos);
    ASSERT_EQ(event.rfind("data: ", 0), 0u) << event;
    if (event == "data: [DONE]") done = true;
    else events.push_back(Json::parse(event.substr(6)));
  }
  EXPECT_TRUE(done) << res->body;
  ASSERT_GE(events.size(), 3u) << res->body;
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    EXPECT_EQ(events[i]["object"], "chat.completion.chunk");
    content += events[i]["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, want);
  EXPECT_FALSE(content.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(server.terminate(10), 0) << server.log();
}

}  // namespace
}  // namespace kplan
