#!/usr/bin/env python3
"""How far transformers' own bf16 inference lies from its float32 goldens, by the metric the GPU
tests use (max|a-b| / max|b| per logits row): the yardstick for kplan's bf16 storage.

Runs on the GPU machine (torch + transformers). For each golden file it re-creates the checkpoint
with `kplan synth` (its synth_args; the sha256 must match the golden's), loads it as
make_goldens.py does (float32, eager attention and experts; INT4 dequantised in Python), casts the
model to bfloat16 and prints the worst relative error of its logits at the golden positions
against the golden's float32 logits, then the same for the float32 model on this device.

  python3 tools/device/hf_bf16_error.py --kplan build/bin/kplan --goldens tests/data/goldens tiny tiny2 ...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_goldens  # noqa: E402


def worst_error(model, golden, device):
    worst = 0.0
    for prompt in golden["prompts"]:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt["ids"]], device=device), use_cache=False).logits[0].float()
        for k, pos in enumerate(prompt["logits_positions"]):
            want = torch.tensor(prompt["logits"][k], device=device)
            worst = max(worst, ((logits[pos] - want).abs().max() / want.abs().max()).item())
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kplan", required=True, help="the kplan binary (for `kplan synth`)")
    ap.add_argument("--goldens", required=True, help="the folder of golden JSON files")
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("cases", nargs="+")
    args = ap.parse_args()
    make_goldens.set_exact_float32()
    device = torch.device(args.device)
    for case in args.cases:
        with open(os.path.join(args.goldens, case + ".json")) as f:
            golden = json.load(f)
        with tempfile.TemporaryDirectory(prefix="hf-bf16-") as tmp:
            ckpt = os.path.join(tmp, "ckpt")
            subprocess.run([args.kplan, "synth", *golden["synth_args"], "--out", ckpt], check=True, stdout=subprocess.DEVNULL)
            if make_goldens.checkpoint_hashes(ckpt) != golden["checkpoint_sha256"]:
                raise RuntimeError(f"{case}: `kplan synth {' '.join(golden['synth_args'])}` no longer makes the golden's checkpoint")
            model = make_goldens.load_target(ckpt, device, {})
            f32 = worst_error(model, golden, device)
            bf16 = worst_error(model.to(dtype=torch.bfloat16), golden, device)
        print(f"{case:10s} transformers bf16 against its float32 golden: max rel {bf16:.3g} (float32 on {args.device}: {f32:.3g})")


if __name__ == "__main__":
    main()
