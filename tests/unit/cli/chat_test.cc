// `kplan run --chat / --messages` (issue 11 item 3): a conversation rendered with the checkpoint's
// chat template (chat_template.jinja, else tokenizer_config.json's chat_template, a string or the
// list entry named "default") gives jinja2's text (tests/data/chat_templates/goldens.json), through
// a checkpoint directory and through a compiled plan (the tokenizer bundle carries the template),
// and decodes the tokens `--prompt` gives for that text. Without a template --chat names the files
// it looked for; a malformed conversation is refused by field.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/unit/kplan_cli.h"
#include "tests/unit/test_support.h"

namespace kplan {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using testing_util::expect_contains;

const fs::path kMini = fs::path(KPLAN_SOURCE_DIR) / "models" / "mini-v3";
const fs::path kTemplates = fs::path(KPLAN_TEST_DATA_DIR) / "chat_templates";

class Chat : public ::testing::Test {
 protected:
  // The bundled target's files, linked into `dir` (tokenizer_config.json copied: tests edit it).
  fs::path checkpoint(const std::string& name) {
    const fs::path dir = scratch_.path() / name;
    fs::create_directories(dir);
    for (const char* f : {"config.json", "model.safetensors", "tiktoken.model"}) fs::create_symlink(kMini / f, dir / f);
    fs::copy_file(kMini / "tokenizer_config.json", dir / "tokenizer_config.json");
    return dir;
  }
  // The bundled target without its chat template (tokenizer_config.json's chat_template removed):
  // a checkpoint that ships none.
  fs::path untemplated(const std::string& name) {
    const fs::path dir = checkpoint(name);
    nlohmann::ordered_json config = nlohmann::ordered_json::parse(testing_util::read_file(dir / "tokenizer_config.json"));
    config.erase("chat_template");
    std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
    return dir;
  }
  CliResult kplan(const std::string& args) { return test::run_kplan(args, scratch_.path()); }
  std::string golden(const std::string& tmpl, const std::string& conversation) {
    const nlohmann::json g = nlohmann::json::parse(testing_util::read_file(kTemplates / "goldens.json"));
    return g.at(tmpl).at(conversation).at("text").get<std::string>();
  }
  // Key order kept: tojson prints keys as the conversation has them.
  nlohmann::ordered_json conversation(const std::string& name) {
    for (const nlohmann::ordered_json& c :
         nlohmann::ordered_json::parse(testing_util::read_file(kTemplates / "conversations.json")))
      if (c["name"] == name) return c;
    ADD_FAILURE() << "no conversation " << name;
    return {};
  }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = scratch_.path() / name;
    std::ofstream(p) << text;
    return p;
  }
  testing_util::TempDir scratch_{"chat"};
};

TEST_F(Chat, ChatTemplateJinjaRendersAsJinja2AndDecodesThePromptsTokens) {
  const fs::path dir = checkpoint("k2");
  fs::copy_file(kTemplates / "kimi-k2.jinja", dir / "chat_template.jinja");
  const std::string user = conversation("one user turn")["messages"][0]["content"];
  const CliResult shown = kplan("run " + dir.string() + " --chat '" + user + "' --print-prompt");
  ASSERT_EQ(shown.status, 0) << shown.err;
  EXPECT_EQ(shown.out, golden("kimi-k2.jinja", "one user turn") + "\n");

  // The decode is --prompt's on the rendered text (its turn markers become their special ids).
  const std::string run = " --max-new 8 --ignore-eos --device cpu -q";
  const CliResult chat = kplan("run " + dir.string() + " --chat '" + user + "'" + run);
  ASSERT_EQ(chat.status, 0) << chat.err;
  const fs::path text = write("prompt.txt", golden("kimi-k2.jinja", "one user turn"));
  const CliResult plain = kplan("run " + dir.string() + " --prompt \"$(cat " + text.string() + ")\"" + run);
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(chat.out, plain.out);

  // A compiled plan carries the template in its tokenizer bundle.
  const fs::path plan = scratch_.path() / "k2.kplan";
  ASSERT_EQ(kplan("compile --model " + dir.string() + " -o " + plan.string()).status, 0);
  const CliResult from_plan = kplan("run " + plan.string() + " --chat '" + user + "'" + run);
  ASSERT_EQ(from_plan.status, 0) << from_plan.err;
  EXPECT_EQ(from_plan.out, chat.out);
  const fs::path messages = write("m.json", conversation("tools, a tool call and its result").dump());
  const CliResult tools = kplan("run " + plan.string() + " --messages " + messages.string() + " --print-prompt");
  ASSERT_EQ(tools.status, 0) << tools.err;
  EXPECT_EQ(tools.out, golden("kimi-k2.jinja", "tools, a tool call and its result") + "\n");
}

TEST_F(Chat, TokenizerConfigTemplatesAStringOrTheDefaultOfAList) {
  const fs::path dir = checkpoint("ds");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(testing_util::read_file(dir / "tokenizer_config.json"));
  const std::string ds = testing_util::read_file(kTemplates / "deepseek-v3.jinja");
  config["chat_template"] = ds;
  std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  const fs::path messages = write("m.json", conversation("system, history and a new turn")["messages"].dump());
  // The golden was rendered with DeepSeek's BOS; the bundled tokenizer's is [BOS].
  std::string want = golden("deepseek-v3.jinja", "system, history and a new turn");
  want.replace(want.find("<｜begin▁of▁sentence｜>"), std::string("<｜begin▁of▁sentence｜>").size(), "[BOS]");
  CliResult r = kplan("run " + dir.string() + " --messages " + messages.string() + " --print-prompt");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, want + "\n");
  // {"messages": [...], other variables}: here `thinking` for the K2.6-shaped template.
  config["chat_template"] = nlohmann::ordered_json::array(
      {{{"name", "tool_use"}, {"template", "unused"}},
       {{"name", "default"}, {"template", testing_util::read_file(kTemplates / "kimi-k2.6.jinja")}}});
  std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  nlohmann::ordered_json off = conversation("thinking off");
  off.erase("name");
  const fs::path vars = write("v.json", off.dump());
  r = kplan("run " + dir.string() + " --messages " + vars.string() + " --print-prompt");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, golden("kimi-k2.6.jinja", "thinking off") + "\n");
  // A list without "default" is refused naming what it has.
  config["chat_template"] = nlohmann::ordered_json::array({{{"name", "tool_use"}, {"template", "unused"}}});
  std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  r = kplan("run " + dir.string() + " --chat hi --print-prompt");
  EXPECT_EQ(r.status, 1);
  expect_contains(r.err, {"tokenizer_config.json", "tool_use", "\"default\""});
}

TEST_F(Chat, TheInteractiveChatKeepsTheConversation) {
  const fs::path dir = checkpoint("repl");
  fs::copy_file(kTemplates / "kimi-k2.jinja", dir / "chat_template.jinja");
  const fs::path input = write("in.txt", "def f(x):\nand g?\n/reset\ndef f(x):\n");
  const CliResult r = kplan("chat " + dir.string() + " --device cpu --max-new 6 -q < " + input.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> replies = test::lines_of(r.out);
  ASSERT_EQ(replies.size(), 3u) << r.out;
  // Each reply is `run`'s text for the conversation so far; /reset forgets it.
  auto run_text = [&](const std::string& args) {
    const CliResult c = kplan("run " + dir.string() + " " + args + " --max-new 6 --device cpu -q");
    EXPECT_EQ(c.status, 0) << c.err;
    const size_t at = c.out.find("text: ");
    return at == std::string::npos ? std::string() : c.out.substr(at + 6, c.out.size() - at - 7);
  };
  EXPECT_EQ(replies[0], run_text("--chat 'def f(x):'"));
  nlohmann::ordered_json two = nlohmann::ordered_json::array(
      {{{"role", "user"}, {"content", "def f(x):"}}, {{"role", "assistant"}, {"content", replies[0]}},
       {{"role", "user"}, {"content", "and g?"}}});
  EXPECT_EQ(replies[1], run_text("--messages " + write("two.json", two.dump()).string()));
  EXPECT_EQ(replies[2], replies[0]);
  // Without a template it says so before loading anything.
  const CliResult none = kplan("chat " + untemplated("plain").string() + " --device cpu < " + input.string());
  EXPECT_EQ(none.status, 1);
  expect_contains(none.err, {"no chat template"});
}

TEST_F(Chat, NoTemplateAndBadConversationsAreRefusedClearly) {
  const fs::path plain = untemplated("plain");
  CliResult r = kplan("run " + plain.string() + " --chat hi -q");
  EXPECT_EQ(r.status, 1);
  expect_contains(r.err, {"kplan: error: --chat: no chat template: looked for " + (plain / "chat_template.jinja").string(),
                          (plain / "tokenizer_config.json").string()});
  const fs::path plan = scratch_.path() / "plain.kplan";
  ASSERT_EQ(kplan("compile --model " + plain.string() + " -o " + plan.string()).status, 0);
  r = kplan("run " + plan.string() + " --chat hi -q");
  EXPECT_EQ(r.status, 1);
  expect_contains(r.err, {"no chat template: '" + plan.string() + "' carries none", "chat_template.jinja"});

  const fs::path dir = checkpoint("bad");
  fs::copy_file(kTemplates / "kimi-k2.jinja", dir / "chat_template.jinja");
  const struct {
    std::string json, error;
  } cases[] = {
      {"{\"role\": \"user\"}", "conversation: an object needs a \"messages\" list"},
      {"[{\"role\": \"user\", \"content\": \"a\"}, {\"content\": \"b\"}]", "messages[1].role: must be a string"},
      {"[{\"role\": \"user\", \"content\": 3}]", "messages[0].content: must be a string, null or a list of parts"},
      {"[{\"role\": \"user\"", "conversation: not valid JSON"},
      {"[{\"role\": \"robot\", \"content\": \"x\"}]", "raised an exception: unknown role: robot"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.json);
    r = kplan("run " + dir.string() + " --messages " + write("bad.json", c.json).string() + " -q");
    EXPECT_EQ(r.status, 1);
    expect_contains(r.err, {"kplan: error: --messages", c.error});
  }
  // The template's own errors name its file and line.
  std::ofstream(dir / "chat_template.jinja") << "{% for m in messages %}\n{{ m|selectattr('x') }}{% endfor %}";
  r = kplan("run " + dir.string() + " --chat hi -q");
  EXPECT_EQ(r.status, 1);
  expect_contains(r.err, {"(chat_template.jinja):2: unsupported construct: the filter 'selectattr'"});
  r = kplan("run " + dir.string() + " --chat hi --prompt x");
  EXPECT_EQ(r.status, 2);
  expect_contains(r.err, {"exactly one of --prompt TEXT, --prompt-ids 1,2,3, --chat TEXT and --messages FILE.json"});
}

}  // namespace
}  // namespace kplan
