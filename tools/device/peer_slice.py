#!/usr/bin/env python3
"""The K2.6-width peer (../shared/peers/hf_deepseek_v3_slice.py, staged in .carry/gpu/peers) with a
fresh context before every timed step.

transformers 5's StaticCache advances its own write position on every forward, whatever
cache_position says, so the peer's own loop (3 warm-up + 20 timed steps of each N over one cache)
writes past the cache it sized (`index_copy_(): index out of bounds` at N = 16 eager, 64
compiled). Here each timed step starts from a cache reset and a re-prefill of the same context
(not timed): every step sees exactly `--context` cached positions, as kplan's bench steps do.
Same model, weights, floor and JSON as the peer's; its functions are imported, not copied.
  python3 peer_slice.py --peer-dir .carry/gpu/peers --layers 3 --tokens 1,16 --compile --json out.json
"""
import argparse, importlib.util, json, os, sys
import torch


def load_peer(peer_dir):
    path = os.path.join(peer_dir, "hf_deepseek_v3_slice.py")
    spec = importlib.util.spec_from_file_location("hf_deepseek_v3_slice", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-dir", required=True)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--tokens", default="1,2,4,8,16,32,64")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--bandwidth", type=float, default=4.3e12)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json")
    a = ap.parse_args()
    P = load_peer(a.peer_dir)
    cfg = P.k26_config(a.layers)
    cfg._attn_implementation = "sdpa"
    model = P.random_model(cfg, a.seed)
    sizes = [int(t) for t in a.tokens.split(",")]
    ctx = a.context
    cache = P.StaticCache(config=cfg, max_cache_len=ctx + max(sizes))
    ids = torch.randint(0, cfg.vocab_size, (1, ctx), device="cuda")
    forward = torch.compile(model.forward, mode="reduce-overhead", dynamic=False) if a.compile else model.forward

    def prefill():
        cache.reset()
        model(ids, past_key_values=cache, cache_position=torch.arange(ctx, device="cuda"), use_cache=True, logits_to_keep=1)

    rows = []
    with torch.no_grad():
        for n in sizes:
            tok = torch.randint(0, cfg.vocab_size, (1, n), device="cuda")
            pos = torch.arange(ctx, ctx + n, device="cuda")
            times = []
            for rep in range(3 + a.reps):  # 3 warm-ups (compile, graph capture), then timed
                prefill()
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                forward(tok, past_key_values=cache, cache_position=pos, position_ids=pos[None], use_cache=True)
                end.record()
                torch.cuda.synchronize()
                if rep >= 3:
                    times.append(start.elapsed_time(end))
            ms = sorted(times)[len(times) // 2]
            floor_ms = P.floor_bytes(cfg, n) / a.bandwidth * 1e3
            rows.append({"tokens": n, "ms": ms, "floor_ms": floor_ms, "fraction_of_floor": floor_ms / ms})
            print(f"tokens {n:3d}: {ms:7.2f} ms   floor {floor_ms:6.2f} ms   {100 * floor_ms / ms:4.0f}% of floor", flush=True)
    if a.json:
        json.dump({"peer": "transformers DeepseekV3" + (" compiled" if a.compile else " eager"), "layers": a.layers,
                   "context": ctx, "rows": rows}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
