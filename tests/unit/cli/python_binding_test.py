#!/usr/bin/env python3
"""The Python binding (tools/python/kplan, ctypes over libkplan.so) against the kplan CLI on the same
plans: generate() gives `kplan run`'s tokens (greedy, and sampled with a seed and the processors
under DDTree), stream() yields the same tokens one by one and ends the decode when abandoned, text
prompts and stop strings on the bundled pair's tokenizer, and errors raised as kplan.Error with the
runtime's message. Environment (set by ctest): KPLAN_BINARY, KPLAN_LIBRARY, KPLAN_SOURCE_DIR,
PYTHONPATH=tools/python."""
import os
import shutil
import subprocess
import tempfile
import unittest

import kplan

BINARY = os.environ["KPLAN_BINARY"]
SOURCE = os.environ["KPLAN_SOURCE_DIR"]


def cli(*args):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("kplan %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


def cli_ids(*args):
    return [int(t) for t in cli(*args).splitlines()[0].split()]


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kplan_python_")
        target, draft = os.path.join(cls.dir, "t"), os.path.join(cls.dir, "d")
        cli("synth", "tiny", "--seed", "1", "--out", target, "--draft", draft)
        cls.tiny = os.path.join(cls.dir, "tiny.kplan")
        cli("compile", "--model", target, "--draft", draft, "-o", cls.tiny)
        cls.mini = os.path.join(cls.dir, "mini.kplan")
        cli("compile", "--model", os.path.join(SOURCE, "models", "mini-v3"), "-o", cls.mini)
        cls.model = kplan.Model(cls.tiny, device="cpu")

    @classmethod
    def tearDownClass(cls):
        cls.model.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_version_and_info(self):
        self.assertEqual(kplan.version(), "0.1.0")
        self.assertEqual(self.model.device, "cpu")
        self.assertEqual(self.model.info["vocab_size"], 1024)
        self.assertEqual(self.model.info["has_drafter"], 1)
        self.assertEqual(self.model.eos_ids, [1])

    def test_generate_gives_the_clis_tokens(self):
        prompt = [5, 17, 42]
        want = cli_ids("run", self.tiny, "--prompt-ids", "5,17,42", "--max-new", "12", "--ignore-eos", "-q")
        got = self.model.generate(prompt, max_new=12, ignore_eos=True)
        self.assertEqual(got.tokens, want)
        self.assertEqual(got.stop_reason, "max-new")
        self.assertEqual(got.stats["generated_tokens"], 12)
        self.assertGreater(got.stats["tokens_per_second"], 0)
        sampled = ["--temperature", "0.8", "--top-k", "50", "--top-p", "0.95", "--repetition-penalty", "1.2",
                   "--seed", "5", "--spec", "ddtree", "--budget", "8"]
        want = cli_ids("run", self.tiny, "--prompt-ids", "5,17,42", "--max-new", "16", "--ignore-eos", "-q", *sampled)
        got = self.model.generate(prompt, max_new=16, ignore_eos=True, temperature=0.8, top_k=50, top_p=0.95,
                                  repetition_penalty=1.2, seed=5, spec="ddtree", budget=8)
        self.assertEqual(got.tokens, want)
        self.assertEqual(got.seed, 5)
        self.assertGreater(got.stats["rounds"], 0)
        ar = self.model.generate(prompt, max_new=16, ignore_eos=True, temperature=0.8, top_k=50, top_p=0.95,
                                 repetition_penalty=1.2, seed=5)
        self.assertEqual(ar.tokens, want, "DDTree's sample is AR's under the processors")

    def test_a_random_seed_by_default(self):
        a = self.model.generate([5, 17, 42], max_new=12, temperature=1.5, ignore_eos=True)
        b = self.model.generate([5, 17, 42], max_new=12, temperature=1.5, ignore_eos=True)
        self.assertNotEqual(a.seed, b.seed)
        again = self.model.generate([5, 17, 42], max_new=12, temperature=1.5, ignore_eos=True, seed=a.seed)
        self.assertEqual(again.tokens, a.tokens)

    def test_stream_yields_the_same_tokens_and_stops_when_abandoned(self):
        options = dict(max_new=20, ignore_eos=True, spec="ddtree", temperature=0.7, seed=11)
        whole = self.model.generate([5, 17, 42], **options)
        pieces = list(self.model.stream([5, 17, 42], **options))
        self.assertEqual([p.token for p in pieces], whole.tokens)
        taken = []
        for p in self.model.stream([5, 17, 42], **options):
            taken.append(p.token)
            if len(taken) == 3:
                break
        self.assertEqual(taken, whole.tokens[:3])
        # The session is free again, and decodes as before.
        self.assertEqual(self.model.generate([5, 17, 42], **options).tokens, whole.tokens)

    def test_text_prompts_and_stop_strings(self):
        with kplan.Model(self.mini, device="cpu") as mini:
            self.assertTrue(mini.has_tokenizer)
            full = mini.generate("def has_key(ch):", max_new=24, ignore_eos=True)
            self.assertEqual(full.text, mini.decode(full.tokens))
            want = cli("run", self.mini, "--prompt", "def has_key(ch):", "--max-new", "24", "--ignore-eos", "-q")
            self.assertEqual(want.splitlines()[0], " ".join(map(str, full.tokens)))
            stop = full.text[len(full.text) // 2:len(full.text) // 2 + 3]
            cut = mini.generate("def has_key(ch):", max_new=24, ignore_eos=True, stop=[stop])
            self.assertEqual(cut.stop_reason, "stop string")
            self.assertEqual(cut.text, full.text[:full.text.find(stop)])
            self.assertEqual(cut.tokens, full.tokens[:len(cut.tokens)])
            self.assertEqual("".join(p.text for p in mini.stream("def has_key(ch):", max_new=24, ignore_eos=True)),
                             full.text)

    def test_chat_template(self):
        import json
        data = os.path.join(SOURCE, "tests", "data", "chat_templates")
        ckpt = os.path.join(self.dir, "chat")
        os.makedirs(ckpt, exist_ok=True)
        for f in ("config.json", "model.safetensors", "tiktoken.model", "tokenizer_config.json"):
            if not os.path.exists(os.path.join(ckpt, f)):
                os.symlink(os.path.join(SOURCE, "models", "mini-v3", f), os.path.join(ckpt, f))
        shutil.copy(os.path.join(data, "kimi-k2.jinja"), os.path.join(ckpt, "chat_template.jinja"))
        plan = os.path.join(self.dir, "chat.kplan")
        cli("compile", "--model", ckpt, "-o", plan)
        goldens = json.load(open(os.path.join(data, "goldens.json"), encoding="utf-8"))["kimi-k2.jinja"]
        convs = {c["name"]: c for c in json.load(open(os.path.join(data, "conversations.json"), encoding="utf-8"))}
        with kplan.Model(plan, device="cpu") as m:
            self.assertTrue(m.chat_template.startswith("{#- A Kimi K2-shaped"))
            tools = convs["tools, a tool call and its result"]
            self.assertEqual(m.apply_chat_template(tools["messages"], tools=tools["tools"]),
                             goldens["tools, a tool call and its result"]["text"])
            user = convs["one user turn"]["messages"]
            text = m.apply_chat_template(user)
            self.assertEqual(text, goldens["one user turn"]["text"])
            want = cli_ids("run", plan, "--chat", user[0]["content"], "--max-new", "8", "--ignore-eos", "-q")
            self.assertEqual(m.generate(text, max_new=8, ignore_eos=True).tokens, want)
            with self.assertRaisesRegex(kplan.Error, r"messages\[0\]\.role"):
                m.apply_chat_template([{"content": "x"}])
        # The bundled target's own template (tokenizer_config.json's chat_template, Kimi K2's turn markers).
        with kplan.Model(self.mini, device="cpu") as mini:
            self.assertTrue(mini.chat_template.startswith("{#- The bundled pair's chat template"))
            self.assertEqual(mini.apply_chat_template([{"role": "system", "content": "Be brief."},
                                                       {"role": "user", "content": "hi"}]),
                             "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>hi"
                             "<|im_end|><|im_assistant|>assistant<|im_middle|>")
        # A checkpoint without one: said so.
        plain = os.path.join(self.dir, "plain")
        os.makedirs(plain, exist_ok=True)
        for f in ("config.json", "model.safetensors", "tiktoken.model"):
            if not os.path.exists(os.path.join(plain, f)):
                os.symlink(os.path.join(SOURCE, "models", "mini-v3", f), os.path.join(plain, f))
        with open(os.path.join(SOURCE, "models", "mini-v3", "tokenizer_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        del config["chat_template"]
        with open(os.path.join(plain, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        plain_plan = os.path.join(self.dir, "plain.kplan")
        cli("compile", "--model", plain, "-o", plain_plan)
        with kplan.Model(plain_plan, device="cpu") as untemplated:
            self.assertEqual(untemplated.chat_template, "")
            with self.assertRaisesRegex(kplan.Error, "no chat template"):
                untemplated.apply_chat_template([{"role": "user", "content": "hi"}])

    def test_errors_carry_the_runtimes_message(self):
        with self.assertRaisesRegex(kplan.Error, "top_p"):
            self.model.generate([5], top_p=1.5)
        with self.assertRaisesRegex(kplan.Error, "outside the vocabulary"):
            self.model.generate([5, 99999])
        with self.assertRaisesRegex(kplan.Error, "no tokenizer"):
            self.model.generate("text")
        with self.assertRaisesRegex(kplan.Error, "checkpoint directory needs the compiler"):
            kplan.Model(self.dir)
        with self.assertRaisesRegex(kplan.Error, "nonexistent"):
            kplan.Model(os.path.join(self.dir, "nonexistent.kplan"))
        with self.assertRaisesRegex(kplan.Error, "max_context 100000 is past the plan's context"):
            kplan.Model(self.tiny, device="cpu", max_context=100000)


if __name__ == "__main__":
    unittest.main(verbosity=2)
