// Chat templates rendered in C++ (runtime/tokenizer/chat_template.h) against Python's jinja2 as
// transformers runs it: every fixture template (Kimi K2-, K2.6- and DeepSeek-V3-shaped, in
// tests/data/chat_templates) over every conversation gives goldens.json's text byte for byte
// (make_goldens.py wrote it with jinja2), or fails where jinja2 failed. Constructs outside the
// subset are refused at parse time naming the construct and its line; the template is picked
// from tokenizer_config.json (a string, or the list entry named "default") or chat_template.jinja.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ir/support/error.h"
#include "runtime/tokenizer/chat_template.h"
#include "tests/unit/test_support.h"

namespace kplan::tokenizer {
namespace {

using Json = nlohmann::ordered_json;
using testing_util::error_of;
using testing_util::expect_contains;

const std::filesystem::path kDir = std::filesystem::path(KPLAN_TEST_DATA_DIR) / "chat_templates";

std::string read(const std::filesystem::path& p) { return testing_util::read_file(p); }

std::string render(const std::string& source, const Json& vars) {
  return ChatTemplate::parse(source, "t.jinja").render(vars);
}

TEST(ChatTemplate, FixtureTemplatesRenderAsJinja2Does) {
  const Json conversations = Json::parse(read(kDir / "conversations.json"));
  const Json goldens = Json::parse(read(kDir / "goldens.json"));
  ASSERT_EQ(goldens.size(), 3u);
  int texts = 0, errors = 0;
  for (auto it = goldens.begin(); it != goldens.end(); ++it) {
    const ChatTemplate t = ChatTemplate::parse(read(kDir / it.key()), it.key());
    for (const Json& conv : conversations) {
      const std::string name = conv["name"].get<std::string>();
      SCOPED_TRACE(it.key() + " / " + name);
      Json vars = {{"bos_token", "<｜begin▁of▁sentence｜>"}, {"eos_token", "<｜end▁of▁sentence｜>"}};
      for (auto c = conv.begin(); c != conv.end(); ++c)
        if (c.key() != "name") vars[c.key()] = c.value();
      const Json& want = it.value().at(name);
      if (want.contains("text")) {
        EXPECT_EQ(t.render(vars), want["text"].get<std::string>());
        ++texts;
      } else {
        const std::string msg = error_of([&] { t.render(vars); });
        EXPECT_NE(msg.find(it.key() + ":"), std::string::npos) << msg;  // names the template and line
        if (want["error"] == "unknown role: robot") expect_contains(msg, {"raised an exception: unknown role: robot"});
        ++errors;
      }
    }
  }
  EXPECT_EQ(texts, 19);
  EXPECT_EQ(errors, 2);
}

TEST(ChatTemplate, WhitespaceControlAsTransformersSetsIt) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before one goes;
  // `-` strips all whitespace on its side; {{ }} keeps both; one trailing newline of the source goes.
  EXPECT_EQ(render("{% if true %}\n  a\n{% endif %}\nb\n", {}), "  a\nb");
  EXPECT_EQ(render("x  {%- if true -%}  \n y {%- endif %}", {}), "xy");
  EXPECT_EQ(render("{{ 'a' }}\n  {{ 'b' }}\n\n", {}), "a\n  b\n");
  EXPECT_EQ(render("  {# note #}\nz", {}), "z");
  EXPECT_EQ(render("a\r\nb", {}), "a\nb");
}

TEST(ChatTemplate, ExpressionsFiltersTestsAndLoops) {
  const Json vars = {{"xs", {1, 2, 3}}, {"m", {{"role", "user"}, {"content", " hi "}}}, {"f", 2.5}, {"n", nullptr}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}", vars),
            "1/3,2/3,3/3");
  EXPECT_EQ(render("{% for x in xs if x != 2 %}{{ loop.index0 }}{{ x }}{% else %}none{% endfor %}", vars), "0113");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}", vars), "empty");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 3 %}{% break %}{% endif %}"
                   "{{ x }}{% endfor %}",
                   vars),
            "1");
  EXPECT_EQ(render("{{ m.content|trim }}|{{ m['role'] ~ 1 }}|{{ xs|length }}|{{ missing|default('d') }}", vars),
            "hi|user1|3|d");
  EXPECT_EQ(render("{{ m|tojson }} {{ xs|tojson(indent=2) }}", vars),
            "{\"role\": \"user\", \"content\": \" hi \"} [\n  1,\n  2,\n  3\n]");
  EXPECT_EQ(render("{{ f }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ n }} {{ true }} {{ xs }}", vars),
            "2.5 3 3.5 2 None True [1, 2, 3]");
  EXPECT_EQ(render("{{ m is mapping }}{{ n is none }}{{ missing is defined }}{{ m.content is string }}"
                   "{{ 'x' not in m }}{{ 'role' in m }}{{ 3 is odd }}",
                   vars),
            "TrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ xs[-1] }}{{ xs[1:] }}{{ 'abc'[::-1] }}{{ 'a</think>b'.split('</think>')[-1] }}"
                   "{{ m.get('name', 'anon') }}{{ ' x '.strip() }}{{ 'ab'.startswith('a') }}",
                   vars),
            "3[2, 3]cbabanonxTrue");
  EXPECT_EQ(render("{% set ns = namespace(k=0) %}{% for x in xs %}{% set ns.k = ns.k + x %}{% set local = x %}"
                   "{% endfor %}{{ ns.k }}{{ local is defined }}",
                   vars),
            "6False");
  EXPECT_EQ(render("{% macro tag(name, v='none') %}<{{ name }}={{ v }}>{% endmacro %}{{ tag('a') }}{{ tag('b', v=1) }}",
                   vars),
            "<a=none><b=1>");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'A': 2, 'c': 3}|dictsort %}{{ k }}{{ v }}{% endfor %}", vars), "A2b1c3");
  EXPECT_EQ(render("{% set block %}x{{ 1 + 1 }}{% endset %}{{ block }}{{ range(3)|list }}{{ {'a': [1]}['a'][0] }}", vars),
            "x2[0, 1, 2]1");
}

// Float literals past double's range are Python's float() of them: inf and 0.0, not an
// "internal error" (a fuzz_chat_template find: 55554E7777 threw std::out_of_range from stod).
TEST(ChatTemplate, FloatLiteralsPastTheRangeAreInfAndZero) {
  EXPECT_EQ(render("{{ 55554E7777 }} {{ -1e999 }} {{ 1e-999 }}", Json::object()), "inf -inf 0.0");
}

TEST(ChatTemplate, UnsupportedConstructsAreRefusedByNameAndLine) {
  const struct {
    std::string source, construct;
  } cases[] = {
      {"a\n{% include 'other.jinja' %}", "t.jinja:2: unsupported construct 'include'"},
      {"{% extends 'base' %}", "unsupported construct 'extends'"},
      {"{% import 'm' as m %}", "unsupported construct 'import'"},
      {"{% raw %}x{% endraw %}", "unsupported construct 'raw'"},
      {"{% filter upper %}x{% endfilter %}", "unsupported construct 'filter'"},
      {"\n\n{{ xs|selectattr('a') }}", "t.jinja:3: unsupported construct: the filter 'selectattr'"},
      {"{{ x is divisibleby(3) }}", "unsupported construct: the test 'divisibleby'"},
      {"{{ 'a'.format(1) }}", "unsupported construct: the method 'format()'"},
      {"{{ '%s' % x }}", "'%' string formatting"},
      {"{{ 2 ** 3 }}", "unsupported construct '**'"},
      {"{% if x %}a", "the template ends before 'elif' or 'else' or 'endif'"},
      {"{% endfor %}", "'endfor' without its opening statement"},
      {"{{ 'a' ", "a tag is never closed"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source);
    const std::string msg = error_of([&] { ChatTemplate::parse(c.source, "t.jinja").render({{"x", "s"}}); });
    expect_contains(msg, {c.construct});
  }
  // Errors while rendering name the line too.
  expect_contains(error_of([&] { render("a\n{{ raise_exception('no system role') }}", {}); }),
                  {"t.jinja:2: the template raised an exception: no system role"});
  expect_contains(error_of([&] { render("{{ nothing.attr }}", {}); }), {"t.jinja:1: 'nothing' is undefined"});
  expect_contains(error_of([&] { render("{{ strftime_now('%Y') }}", {}); }), {"'strftime_now' is undefined"});
  // Depth is bounded: an error, not a stack overflow.
  expect_contains(error_of([&] { render("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", {}); }),
                  {"t.jinja:1: macro 'f' called more than 64 deep"});
  expect_contains(error_of([&] { render("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", {}); }),
                  {"an expression nested too deep"});
  expect_contains(error_of([&] { render(std::string(200 * 1, ' ') + [] {
                    std::string s;
                    for (int i = 0; i < 200; ++i) s += "{% if true %}";
                    return s;
                  }(), {}); }),
                  {"statements nested more than 128 deep"});
  EXPECT_EQ(render("{{ " + std::string(100, '(') + "1" + std::string(100, ')') + " }}", {}), "1");
  expect_contains(error_of([&] { render("{% for i in range(100000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", {}); }),
                  {"more than a million steps"});
  expect_contains(error_of([&] { render("{{ 'ab' * 100000000 }}", {}); }), {"repeated past 64 MiB"});
}

TEST(ChatTemplate, TheTemplateIsPickedAsTransformersPicksIt) {
  const std::string ds = read(kDir / "deepseek-v3.jinja");
  nlohmann::json config = {{"bos_token", {{"content", "<｜begin▁of▁sentence｜>"}, {"lstrip", false}}},
                           {"eos_token", "<｜end▁of▁sentence｜>"},
                           {"chat_template", ds}};
  EXPECT_EQ(select_chat_template(config, std::nullopt, "c.json"), ds);
  EXPECT_EQ(select_chat_template(config, std::string("jinja file"), "c.json"), "jinja file");  // the file wins
  EXPECT_EQ(special_token_text(config, "bos_token"), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(special_token_text(config, "eos_token"), "<｜end▁of▁sentence｜>");
  EXPECT_EQ(special_token_text(config, "pad_token"), "");
  config["chat_template"] = {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}};
  EXPECT_EQ(select_chat_template(config, std::nullopt, "c.json"), "D");
  config["chat_template"] = {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "rag"}, {"template", "R"}}};
  expect_contains(error_of([&] { select_chat_template(config, std::nullopt, "c.json"); }),
                  {"c.json", "tool_use, rag", "\"default\""});
  config["chat_template"] = 5;
  expect_contains(error_of([&] { select_chat_template(config, std::nullopt, "c.json"); }), {"c.json: chat_template must be"});
  config.erase("chat_template");
  EXPECT_EQ(select_chat_template(config, std::nullopt, "c.json"), std::nullopt);
}

}  // namespace
}  // namespace kplan::tokenizer
