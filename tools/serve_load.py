#!/usr/bin/env python3
"""A loopback load test of `kplan serve`: REQUESTS completion requests, CONCURRENCY at a time, half of
them streamed chat completions when the server has a chat template (--chat), the rest
completions; prints errors, wall time, requests/s, generated tokens/s and the latency
percentiles (p50, p90, p99, max; for streamed requests also the time to the first piece).
Exit status 1 when any request failed.

    kplan serve model.kplan --port 8000 &
    tools/serve_load.py --url http://127.0.0.1:8000 --requests 200 --concurrency 8 --max-tokens 16

Standard library only (the client is tools/python/kplan/client.py)."""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
from kplan.client import Client  # noqa: E402


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--prompt", default="def has_key(ch):")
    ap.add_argument("--chat", action="store_true", help="every other request a streamed chat completion")
    ap.add_argument("--api-key", default=None)
    args = ap.parse_args()

    client = Client(args.url, api_key=args.api_key)
    latencies, first_piece, errors, tokens = [], [], [], [0]
    lock = threading.Lock()
    next_index = [0]

    def one(i):
        t0 = time.monotonic()
        if args.chat and i % 2:
            first = None
            for piece in client.chat([{"role": "user", "content": args.prompt}], stream=True,
                                     max_tokens=args.max_tokens, temperature=0, ignore_eos=True):
                if first is None and piece:
                    first = time.monotonic() - t0
            n = args.max_tokens
        else:
            r = client.completions(args.prompt, max_tokens=args.max_tokens, temperature=0, ignore_eos=True)
            n = r["usage"]["completion_tokens"]
            first = None
        dt = time.monotonic() - t0
        with lock:
            latencies.append(dt)
            tokens[0] += n
            if first is not None:
                first_piece.append(first)

    def worker():
        while True:
            with lock:
                i = next_index[0]
                if i >= args.requests:
                    return
                next_index[0] += 1
            try:
                one(i)
            except Exception as e:  # noqa: BLE001 (counted and printed)
                with lock:
                    errors.append("request %d: %s" % (i, e))

    start = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    print("requests %d at concurrency %d: %d ok, %d errors, %.2f s, %.1f requests/s, %.1f generated tokens/s"
          % (args.requests, args.concurrency, len(latencies), len(errors), wall, len(latencies) / wall, tokens[0] / wall))
    print("latency s: p50 %.3f  p90 %.3f  p99 %.3f  max %.3f"
          % (percentile(latencies, 50), percentile(latencies, 90), percentile(latencies, 99), max(latencies or [0])))
    if first_piece:
        print("first streamed piece s: p50 %.3f  p90 %.3f  p99 %.3f"
              % (percentile(first_piece, 50), percentile(first_piece, 90), percentile(first_piece, 99)))
    for e in errors[:10]:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
