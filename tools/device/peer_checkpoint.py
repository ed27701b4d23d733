#!/usr/bin/env python3
"""Peer for `kplan bench`: HuggingFace transformers' DeepseekV3ForCausalLM on the SAME checkpoint.

Loads a checkpoint directory (e.g. one `kplan synth --config bench/configs/mid.json` wrote) in
bf16 on the GPU, fills a StaticCache with `--context` positions, then times one forward step of N
tokens over that cache (median of --reps, CUDA events), eager or with
torch.compile(mode="reduce-overhead") (CUDA graphs). kplan's bench times the same model, context
and token counts in the same device run, so the two figures divide into a ratio.

transformers 5.x derives each step's cache positions from the cache itself, so every timed step
appends: the cache is re-made and re-filled per token count, sized for warm-up + reps steps, and
the mean context each size actually ran at is reported beside its time.

  python3 tools/device/peer_checkpoint.py --model DIR --context 128 --tokens 1,8,32 [--compile]
"""
import argparse
import json

import torch
from transformers import DeepseekV3ForCausalLM, StaticCache


def median_ms(fn, reps, warm=5):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start, end, times = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--tokens", default="1,8,32")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args()

    model = DeepseekV3ForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16,
                                                  attn_implementation="sdpa").cuda().eval()
    cfg = model.config
    sizes = [int(t) for t in args.tokens.split(",")]
    ctx = args.context
    warm = 5
    gen = torch.Generator(device="cuda").manual_seed(0)
    forward = torch.compile(model.forward, mode="reduce-overhead", dynamic=False) if args.compile else model.forward
    rows = []
    for n in sizes:
        steps = warm + args.reps
        cache = StaticCache(config=cfg, max_cache_len=ctx + (steps + 2) * n)
        tok = torch.randint(0, cfg.vocab_size, (1, n), device="cuda", generator=gen)
        with torch.no_grad():
            ids = torch.randint(0, cfg.vocab_size, (1, ctx), device="cuda", generator=gen)
            model(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            step = lambda: forward(tok, past_key_values=cache, use_cache=True)
            ms = median_ms(step, args.reps, warm)
        mean_context = ctx + (warm + args.reps / 2) * n
        rows.append({"tokens": n, "ms": ms, "mean_context": mean_context})
        mode = "compiled" if args.compile else "eager"
        print(f"peer {mode:8s} tokens {n:3d}: {ms:8.4f} ms (mean context {mean_context:.0f})", flush=True)
    if args.json:
        json.dump({"peer": "transformers DeepseekV3ForCausalLM bf16 sdpa " + ("compiled" if args.compile else "eager"),
                   "transformers": __import__("transformers").__version__, "torch": torch.__version__,
                   "context": ctx, "rows": rows}, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
