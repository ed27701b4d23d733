// A checkpoint's chat template (tokenizer_config.json's chat_template or chat_template.jinja), as
// kplan_chat_template_apply parses and renders it: the input is the template's text, then
// optionally a NUL byte and the conversation (JSON: a list of messages or {"messages": ...};
// a fixed two-turn conversation with a tool otherwise). The template must parse and render or be
// refused with kplan::Error (an unsupported construct, a failed render, a bound on nesting, steps
// or output); and rendering twice gives the same text.
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/chat_template.h"
#include "tests/fuzz/fuzz_support.h"

using namespace kplan;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  nlohmann::ordered_json vars = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Weather in Zürich?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", {{{"id", "f:0"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "f:0"}, {"content", "21"}}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}}},
      {"bos_token", "[BOS]"},
      {"eos_token", "[EOS]"},
      {"add_generation_prompt", true}};
  if (nul != std::string_view::npos) {
    nlohmann::ordered_json conv =
        nlohmann::ordered_json::parse(input.substr(nul + 1), nullptr, /*allow_exceptions=*/false);
    if (conv.is_array()) vars["messages"] = conv;
    else if (conv.is_object()) vars = conv;
  }
  fuzz::refuse_cleanly([&] {
    const tokenizer::ChatTemplate t = tokenizer::ChatTemplate::parse(source, "chat_template.jinja");
    const std::string once = t.render(vars);
    if (t.render(vars) != once) fuzz::finding("two renderings of one conversation differ");
  });
  return 0;
}
