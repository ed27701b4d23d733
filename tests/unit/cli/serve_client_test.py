#!/usr/bin/env python3
"""`kplan serve` from Python's side (issue 11 item 4's "done when"): the server on the bundled pair as shipped
(target, drafter and the target's own chat template) on a free loopback port answers a streamed chat completion through the binding's own
client (kplan.client) and through curl with the same text as the non-streamed answer, and the loopback load
test (tools/serve_load.py) of 200 requests at 8 concurrent completes with no error and prints latency
percentiles. Environment (set by ctest): KPLAN_BINARY, KPLAN_SOURCE_DIR, PYTHONPATH=tools/python."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from kplan.client import Client, ServerError

BINARY = os.environ["KPLAN_BINARY"]
SOURCE = os.environ["KPLAN_SOURCE_DIR"]


class ServeClient(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kplan_serve_py_")
        # The bundled pair as shipped: its tokenizer_config.json carries the chat template.
        target = os.path.join(SOURCE, "models", "mini-v3")
        draft = os.path.join(SOURCE, "models", "mini-v3-dflash")
        cls.log = open(os.path.join(cls.dir, "serve.log"), "w+")
        cls.proc = subprocess.Popen([BINARY, "serve", target, "--draft", draft, "--device", "cpu", "--host", "127.0.0.1",
                                     "--port", "0"], stdout=cls.log, stderr=cls.log)
        port = None
        for _ in range(600):
            cls.log.seek(0)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", cls.log.read())
            if m:
                port = int(m.group(1))
                break
            if cls.proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            cls.log.seek(0)
            raise AssertionError("kplan serve did not start: " + cls.log.read())
        cls.url = "http://127.0.0.1:%d" % port
        cls.client = Client(cls.url)

    @classmethod
    def tearDownClass(cls):
        cls.proc.send_signal(signal.SIGTERM)
        code = cls.proc.wait(timeout=20)
        cls.log.close()
        shutil.rmtree(cls.dir, ignore_errors=True)
        assert code == 0, "kplan serve exited %d on SIGTERM" % code

    def test_streamed_chat_through_the_client_and_curl(self):
        messages = [{"role": "user", "content": "Write a Python function that reverses a list."}]
        options = dict(max_tokens=12, temperature=0, ignore_eos=True)
        whole = self.client.chat(messages, **options)
        text = whole["choices"][0]["message"]["content"]
        self.assertEqual(whole["usage"]["completion_tokens"], 12)
        pieces = list(self.client.chat(messages, stream=True, **options))
        self.assertGreater(len(pieces), 2)
        self.assertEqual("".join(pieces), text)
        self.assertEqual(self.client.models()["data"][0]["id"], "mini-v3")
        if shutil.which("curl"):
            body = json.dumps(dict(options, messages=messages, stream=True))
            out = subprocess.run(["curl", "-sN", self.url + "/v1/chat/completions", "-H",
                                  "Content-Type: application/json", "-d", body],
                                 capture_output=True, text=True, check=True).stdout
            events = [e for e in out.split("\n\n") if e]
            self.assertEqual(events[-1], "data: [DONE]")
            chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
            self.assertEqual("".join(c["choices"][0]["delta"].get("content", "") for c in chunks), text)
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        with self.assertRaises(ServerError) as e:
            self.client.completions("x", max_tokens="many")
        self.assertEqual(e.exception.status, 400)
        self.assertEqual(e.exception.error["param"], "max_tokens")

    def test_load_200_requests_at_8_concurrent(self):
        script = os.path.join(SOURCE, "tools", "serve_load.py")
        r = subprocess.run([sys.executable, script, "--url", self.url, "--requests", "200", "--concurrency", "8",
                            "--max-tokens", "2", "--chat"], capture_output=True, text=True)
        sys.stderr.write(r.stdout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("200 ok, 0 errors", r.stdout)
        self.assertRegex(r.stdout, r"latency s: p50 [0-9.]+  p90 [0-9.]+  p99 [0-9.]+  max [0-9.]+")
        self.assertRegex(r.stdout, r"first streamed piece s: p50 [0-9.]+")


if __name__ == "__main__":
    unittest.main(verbosity=2)
