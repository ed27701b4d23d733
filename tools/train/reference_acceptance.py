#!/usr/bin/env python3
"""Chain-DFlash acceptance of the shipped pair computed outside kplan, in transformers (GPU machine).

  python3 tools/train/reference_acceptance.py --models MODELS --prompts FILE [--count 8] [--max-new 32]

For each prompt (tokenized by tools/train/bpe.py with MODELS/mini-v3's tiktoken.model): the
target's float32 greedy continuation (DeepseekV3ForCausalLM, eager), then DFlash's chain decode
replayed exactly: each round the drafter (dflash_reference.DFlashDrafter, as kplan runs it: the
context is every committed position, the block starts at the bonus token) proposes its argmax
chain, the longest prefix equal to the greedy continuation is accepted, plus the bonus. Prints
per-prompt committed tokens per round, to compare with `kplan bench --acceptance` (chain rows).
"""
import argparse
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "device"))
import bpe  # noqa: E402
import common  # noqa: E402
import dflash_reference  # noqa: E402
import make_goldens  # noqa: E402


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--max-new", type=int, default=32)
    args = ap.parse_args()
    device = common.device()
    make_goldens.set_exact_float32()
    target = make_goldens.load_target(os.path.join(args.models, "mini-v3"), device, {})
    drafter, _, fields = dflash_reference.load_drafter(os.path.join(args.models, "mini-v3-dflash"), device)
    enc = bpe.Encoder(bpe.read_tiktoken_model(os.path.join(args.models, "mini-v3", "tiktoken.model")))
    layer_ids, B, mask_id = fields["target_layer_ids"], fields["block_size"], fields["mask_token_id"]
    hooks = common.LayerOutputs(target, layer_ids)
    results = []
    with open(args.prompts, encoding="utf-8") as f:
        prompts = [json.loads(line)["text"] for line in f][: args.count]
    for text in prompts:
        ids = torch.tensor([enc.encode_ordinary(text)], device=device)
        P = ids.shape[1]
        seq = ids
        for _ in range(args.max_new):  # float32 greedy, no cache (exact)
            seq = torch.cat([seq, target(input_ids=seq).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
        target(input_ids=seq)
        feats = torch.cat([hooks.outputs[i] for i in layer_ids], dim=-1)
        pos, rounds = P, 0  # pos: the bonus token's position
        while pos < P + args.max_new - 1:
            block = torch.full((1, B), mask_id, device=device)
            block[0, 0] = seq[0, pos]
            states = drafter(feats[:, :pos], target.model.embed_tokens(block))
            guess = target.lm_head(states[:, 1:]).argmax(-1)[0]
            want = seq[0, pos + 1: pos + B]
            n = int((guess[: want.numel()] == want).int().cumprod(0).sum())
            pos += n + 1
            rounds += 1
        results.append({"prompt_tokens": P, "rounds": rounds, "committed_per_round": (args.max_new - 1) / rounds})
        print(json.dumps(results[-1]), flush=True)
    mean = sum(r["committed_per_round"] for r in results) / len(results)
    print(f"mean committed per round (chain DFlash, transformers): {mean:.3f}")


if __name__ == "__main__":
    main()
