#pragma once
// Chat templates as HuggingFace checkpoints ship them (tokenizer_config.json's `chat_template`: a
// string, or a list of {"name", "template"}; or a chat_template.jinja file beside it, which wins),
// rendered in C++ the way transformers' apply_chat_template renders them: Jinja with
// trim_blocks and lstrip_blocks, the loop controls, a single trailing newline of the source
// dropped, `tojson` as json.dumps(ensure_ascii=False), and `raise_exception`.
//
// The subset of Jinja real templates (Kimi K2 / K2.5 / K2.6, DeepSeek-V3, Qwen-style) use:
//   statements  if / elif / else, for (with `else`, an `if` filter and a, b unpacking), set (a
//               name, a namespace attribute, a block), macro (positional, keyword and default
//               arguments), break / continue, comments, `-` whitespace control on every tag;
//   expressions literals (strings, numbers, true/false/none, lists, dicts, tuples), names,
//               .attr / [key] / [a:b:c], calls, filters, tests (`is [not] defined / undefined / none
//               / string / number / integer / float / boolean / mapping / iterable / sequence /
//               true / false / odd / even`), not / and / or, in / not in, == != < <= > >=,
//               + - * / // % (numbers), ~ (concatenation), `a if c else b`;
//   the loop    loop.index, index0, revindex, revindex0, first, last, length;
//   filters     trim, tojson (indent, separators, sort_keys, ensure_ascii), length / count,
//               default / d (and its boolean argument), string, first, last, join, upper, lower,
//               list, reverse, int, float, items, dictsort, safe, capitalize, replace, abs;
//   methods     dict: get, items, keys, values; str: strip, lstrip, rstrip, split, startswith,
//               endswith, upper, lower, replace, find;
//   globals     range, namespace, raise_exception (and whatever the caller passes: messages,
//               add_generation_prompt, bos_token, eos_token, tools, ...).
// Anything else (include, import, extends, block, call, filter blocks, raw, other filters, tests,
// methods or functions) is refused when the template is parsed, with an error naming the
// construct and its line.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kplan::tokenizer {

struct ChatTemplateProgram;  // the parsed template (chat_template.cc)

class ChatTemplate {
 public:
  // Parses `source`; `name` names it in errors ("NAME:LINE: ..."). Throws kplan::Error.
  static ChatTemplate parse(std::string_view source, const std::string& name);

  // Renders with `variables` as the template's globals (an object: messages, add_generation_prompt,
  // bos_token, eos_token, ...). Throws kplan::Error ("NAME:LINE: ...") on a failure while
  // rendering, e.g. raise_exception or an operation on an undefined value.
  std::string render(const nlohmann::ordered_json& variables) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::shared_ptr<const ChatTemplateProgram> program_;
};

// The chat template a checkpoint ships: chat_template.jinja's text when present (`jinja_text`),
// else tokenizer_config.json's `chat_template` (a string, or the list entry named "default");
// nullopt when neither has one. `config_name` names the config in errors (a list without a
// "default" entry is refused listing its names; a value of another type is refused by field).
std::optional<std::string> select_chat_template(const nlohmann::json& tokenizer_config,
                                                const std::optional<std::string>& jinja_text,
                                                const std::string& config_name);

// A special token of tokenizer_config.json (bos_token / eos_token) as text: a string, or an
// AddedToken object's "content"; "" when absent or null.
std::string special_token_text(const nlohmann::json& tokenizer_config, const std::string& key);

}  // namespace kplan::tokenizer
