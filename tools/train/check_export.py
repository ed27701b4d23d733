#!/usr/bin/env python3
"""Stage 5 (GPU machine): the shipped files load unchanged in transformers and are what was trained.

  python3 tools/train/check_export.py --data DATA --work WORK --models MODELS --report FILE

  * mini-v3: DeepseekV3ForCausalLM.from_pretrained (through make_goldens.load_target: no missing
    or unexpected keys, weights equal to the file's) gives the trained model's logits (the trained
    weights rounded to bf16) on held-out windows; its held-out loss is reported.
  * mini-v3-int4: compressed-tensors is not installed there, so it is dequantised exactly as
    compressed-tensors does and loaded the same way; held-out loss and greedy agreement with the
    bf16 target are reported.
  * mini-v3-dflash: dflash_reference.load_drafter (strict: every tensor used, every parameter
    present) gives the trained drafter's outputs.
  * the tokenizer: tiktoken (the real library) with tiktoken.model, Kimi's pat_str and the
    specials encodes tokenizer_sample.jsonl and the held-out prompts to the ids our Python
    encoder wrote, and decodes them back to the same bytes.
Exits non-zero on any mismatch.
"""
import argparse
import base64
import json
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "device"))
import bpe  # noqa: E402
import common  # noqa: E402
import dflash_reference  # noqa: E402
import export  # noqa: E402
import make_goldens  # noqa: E402


def bf16_rounded(state):
    """The trained float32 weights as the shipped files hold them (export's dtypes), back in float32."""
    return {k: v.to(torch.float32) for k, v in export.to_checkpoint_dtypes(state).items()}


@torch.no_grad()
def loss_and_argmax(model, rows):
    logits = model(input_ids=rows[:, :-1]).logits.float()
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1)).item()
    return loss, logits


def check_tokenizer(data, report):
    import tiktoken
    vocab = bpe.read_tiktoken_model(os.path.join(data, "tokenizer", "tiktoken.model"))
    enc = tiktoken.Encoding(
        name="mini-v3", pat_str=bpe.KIMI_PAT_STR,
        mergeable_ranks={tok: i for i, tok in enumerate(vocab)},
        special_tokens={name: len(vocab) + off for off, name in bpe.SPECIALS})
    texts = []
    with open(os.path.join(data, "tokenizer_sample.jsonl"), encoding="utf-8") as f:
        texts += [json.loads(line) for line in f]
    mine = bpe.Encoder(vocab)
    with open(os.path.join(data, "heldout_prompts.jsonl"), encoding="utf-8") as f:
        for line in f:
            t = json.loads(line)["text"]
            texts.append({"text": t, "ids": mine.encode_ordinary(t)})
    bad = [s["text"][:60] for s in texts
           if enc.encode_ordinary(s["text"]) != s["ids"] or enc.decode_bytes(s["ids"]) != s["text"].encode("utf-8")]
    report["tokenizer"] = {"texts": len(texts), "tiktoken_mismatches": len(bad), "examples": bad[:5],
                           "tiktoken": tiktoken.__version__ if hasattr(tiktoken, "__version__") else "?"}
    return not bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--report", required=True)
    args = ap.parse_args()
    device = common.device()
    make_goldens.set_exact_float32()
    report, ok = {}, True
    tcfg = common.read_json(common.TARGET_CONFIG)

    held = common.read_stream(os.path.join(args.data, "heldout.u16"))
    g = torch.Generator().manual_seed(7)
    rows = common.windows(held, torch.randint(0, held.numel() - 257, (16,), generator=g), 257).to(device)

    notes = {}
    shipped = make_goldens.load_target(os.path.join(args.models, "mini-v3"), device, notes)
    loss, logits = loss_and_argmax(shipped, rows)
    report["mini-v3"] = {"heldout_loss": loss, "loader": notes}
    target_pt = os.path.join(args.work, "target.pt")
    if os.path.exists(target_pt):  # absent when only the drafter was retrained
        trained = common.build_target(tcfg, attn="eager")
        trained.load_state_dict(bf16_rounded(torch.load(target_pt, map_location="cpu")))
        ref_loss, ref_logits = loss_and_argmax(trained.to(device).eval(), rows)
        diff = (logits - ref_logits).abs().max().item()
        report["mini-v3"].update({"trained_heldout_loss": ref_loss, "max_logit_diff_vs_trained": diff})
        ok &= diff < 1e-3

    int4_dir = os.path.join(args.models, "mini-v3-int4")
    if os.path.isdir(int4_dir):  # absent when only the drafter was retrained
        notes4 = {}
        int4 = make_goldens.load_target(int4_dir, device, notes4)
        loss4, logits4 = loss_and_argmax(int4, rows)
        agree = (logits4.argmax(-1) == logits.argmax(-1)).float().mean().item()
        report["mini-v3-int4"] = {"heldout_loss": loss4, "argmax_agreement_with_bf16": agree, "loader": notes4}
        ok &= loss4 < loss + 0.5

    drafter, _, fields = dflash_reference.load_drafter(os.path.join(args.models, "mini-v3-dflash"), device)
    raw, _ = dflash_reference.read_draft_config(os.path.join(args.models, "mini-v3-dflash"))
    fresh = dflash_reference.DFlashDrafter(dflash_reference.qwen3_config_from(raw), fields)
    fresh.load_state_dict(bf16_rounded(torch.load(os.path.join(args.work, "drafter.pt"), map_location="cpu")))
    fresh = fresh.to(device).eval()
    hooks = common.LayerOutputs(shipped, fields["target_layer_ids"])
    with torch.no_grad():
        shipped(input_ids=rows[:2, :100])
        feats = torch.cat([hooks.outputs[i].float() for i in fields["target_layer_ids"]], dim=-1)
        block = torch.full((2, fields["block_size"]), fields["mask_token_id"], device=device)
        block[:, 0] = rows[:2, 100]
        emb = shipped.model.embed_tokens(block).float()
        d = (drafter(feats, emb) - fresh(feats, emb)).abs().max().item()
    report["mini-v3-dflash"] = {"max_state_diff_vs_trained": d}
    ok &= d < 1e-4

    ok &= check_tokenizer(args.data, report)
    report["ok"] = bool(ok)
    with open(args.report, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps(report, indent=2))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
