#!/usr/bin/env python3
"""Renders every fixture template over every conversation with Python's jinja2 the way transformers'
apply_chat_template does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
tojson as json.dumps(ensure_ascii=False), raise_exception), and writes goldens.json: for each
template and conversation the rendered text, or the exception's message. kplan's C++ renderer must
give the same text byte for byte (tests/unit/tokenizer/chat_template_test.cc). Run from anywhere:
python3 tests/data/chat_templates/make_goldens.py"""
import json
import os

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = ["kimi-k2.jinja", "kimi-k2.6.jinja", "deepseek-v3.jinja"]
SPECIALS = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    conversations = json.load(open(os.path.join(HERE, "conversations.json"), encoding="utf-8"))
    goldens = {}
    for name in TEMPLATES:
        template = env.from_string(open(os.path.join(HERE, name), encoding="utf-8").read())
        goldens[name] = {}
        for conv in conversations:
            variables = dict(SPECIALS)
            variables.update({k: v for k, v in conv.items() if k != "name"})
            try:
                goldens[name][conv["name"]] = {"text": template.render(**variables)}
            except Exception as e:  # noqa: BLE001 (a template error or a TypeError: kplan must fail too)
                goldens[name][conv["name"]] = {"error": str(e)}
    with open(os.path.join(HERE, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
