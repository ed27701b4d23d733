#!/usr/bin/env python3
"""Stage 4: write the trained pair as HuggingFace checkpoints, as the model publishers do.

  python3 tools/train/export.py --data DATA --work WORK --out MODELS --what target|drafter

MODELS/mini-v3/        config.json, model.safetensors (bf16; the router's e_score_correction_bias
                       float32, as DeepSeek-V3's own checkpoints hold it), tiktoken.model,
                       tokenizer_config.json; per-expert tensor names
                       (model.layers.L.mlp.experts.E.{gate,up,down}_proj.weight) whatever layout
                       transformers fused them into in memory
MODELS/mini-v3-int4/   the same with every routed expert's projections as compressed-tensors
                       pack-quantized INT4 (symmetric, group 32, minmax observer: scale = absmax /
                       7.5 in bf16, q = clamp(round(w / scale), -8, 7) stored as q + 8, eight
                       nibbles per int32 along the input dim, low nibble first), like Kimi K2.6
MODELS/mini-v3-dflash/ config.json, model.safetensors (bf16): fc, hidden_norm, layers, norm; no
                       embedding or lm_head (the drafter uses the target's)
Runs on CPU or GPU (torch + safetensors; transformers only to rebuild the trained target).
"""
import argparse
import json
import os
import re
import shutil
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SIZE_LIMIT = 16 * 1024 * 1024
GROUP = 32
INT4_QUANT_CONFIG = {
    "config_groups": {"group_0": {
        "input_activations": None, "output_activations": None, "targets": ["Linear"],
        "weights": {"actorder": None, "block_structure": None, "dynamic": False, "group_size": GROUP,
                    "num_bits": 4, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                    "symmetric": True, "type": "int"}}},
    "format": "pack-quantized",
    "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*",
               "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*"],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}


def hub_tensors(state, config):
    """The state_dict under the published per-expert names. transformers 5 keeps the routed
    experts fused: gate_up_proj [E, 2I, H] (gate rows then up rows) and down_proj [E, H, I]."""
    inter, hidden = config["moe_intermediate_size"], config["hidden_size"]
    out = {}
    for name, t in state.items():
        t = t.detach().cpu()
        m = re.fullmatch(r"(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)", name)
        if not m:
            out[name] = t
            continue
        prefix, kind = m.groups()
        for e in range(t.shape[0]):
            w = t[e]
            if kind == "gate_up_proj":
                if tuple(w.shape) != (2 * inter, hidden):
                    raise RuntimeError(f"{name}: unexpected fused shape {tuple(t.shape)}")
                out[f"{prefix}.{e}.gate_proj.weight"] = w[:inter].clone()
                out[f"{prefix}.{e}.up_proj.weight"] = w[inter:].clone()
            else:
                if tuple(w.shape) != (hidden, inter):
                    raise RuntimeError(f"{name}: unexpected fused shape {tuple(t.shape)}")
                out[f"{prefix}.{e}.down_proj.weight"] = w.clone()
    return out


def to_checkpoint_dtypes(tensors):
    """bf16 everywhere except the router's correction bias (float32)."""
    return {k: (v.to(torch.float32) if k.endswith("e_score_correction_bias") else v.to(torch.bfloat16)).contiguous()
            for k, v in tensors.items()}


def quantize_int4(w):
    """w [out, in] -> (weight_packed int32 [out, in/8], weight_scale bf16 [out, in/32], weight_shape)."""
    out_dim, in_dim = w.shape
    if in_dim % GROUP:
        raise RuntimeError(f"input dim {in_dim} is not a multiple of the group size {GROUP}")
    w = w.to(torch.float32)
    groups = w.view(out_dim, in_dim // GROUP, GROUP)
    scale = (groups.abs().amax(-1) / 7.5).to(torch.bfloat16)
    s = scale.to(torch.float32).unsqueeze(-1)
    q = torch.where(s > 0, torch.round(groups / torch.where(s > 0, s, torch.ones_like(s))), torch.zeros_like(groups))
    q = q.clamp(-8, 7).to(torch.int64).view(out_dim, in_dim) + 8
    nib = q.view(out_dim, in_dim // 8, 8)
    packed = (nib << (4 * torch.arange(8, dtype=torch.int64))).sum(-1)
    packed = torch.where(packed >= 2 ** 31, packed - 2 ** 32, packed).to(torch.int32)
    return packed, scale, torch.tensor([out_dim, in_dim], dtype=torch.int32)


def int4_tensors(tensors):
    out = {}
    for name, t in tensors.items():
        if re.fullmatch(r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight", name):
            base = name[: -len(".weight")]
            packed, scale, shape = quantize_int4(t)
            out[base + ".weight_packed"] = packed
            out[base + ".weight_scale"] = scale
            out[base + ".weight_shape"] = shape
        else:
            out[name] = t
    return out


def write_dir(path, config, tensors, tokenizer_dir=None):
    if os.path.exists(path):
        shutil.rmtree(path)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    if tokenizer_dir:
        shutil.copyfile(os.path.join(tokenizer_dir, "tiktoken.model"), os.path.join(path, "tiktoken.model"))
        # tokenizer_config.json with the chat template added (chat_template.jinja beside this
        # script: Kimi K2's turn markers, which the tokenizer has), keys in sorted order.
        with open(os.path.join(tokenizer_dir, "tokenizer_config.json"), encoding="utf-8") as f:
            tok = json.load(f)
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template.jinja"), encoding="utf-8") as f:
            tok["chat_template"] = f.read()
        with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(dict(sorted(tok.items())), f, indent=2, ensure_ascii=False)
            f.write("\n")


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, n)) for n in os.listdir(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--what", choices=["target", "drafter"], required=True,
                    help="target: mini-v3 and mini-v3-int4 from WORK/target.pt; drafter: mini-v3-dflash")
    args = ap.parse_args()
    tcfg = common.read_json(common.TARGET_CONFIG)
    dcfg = common.read_json(common.DRAFT_CONFIG)
    tok_dir = os.path.join(args.data, "tokenizer")

    if args.what == "target":
        target_state = torch.load(os.path.join(args.work, "target.pt"), map_location="cpu")
        target = to_checkpoint_dtypes(hub_tensors(target_state, tcfg))
        write_dir(os.path.join(args.out, "mini-v3"), tcfg, target, tok_dir)
        qcfg = dict(tcfg)
        qcfg["quantization_config"] = INT4_QUANT_CONFIG
        write_dir(os.path.join(args.out, "mini-v3-int4"), qcfg, int4_tensors(target), tok_dir)
        return
    draft_state = torch.load(os.path.join(args.work, "drafter.pt"), map_location="cpu")
    draft = {k: v.to(torch.bfloat16).contiguous() for k, v in draft_state.items()}
    write_dir(os.path.join(args.out, "mini-v3-dflash"), dcfg, draft)

    sizes = {d: dir_bytes(os.path.join(args.out, d)) for d in ("mini-v3", "mini-v3-int4", "mini-v3-dflash")
             if os.path.isdir(os.path.join(args.out, d))}
    total = sum(sizes.values())
    common.log("export", f"sizes {sizes}, total {total / 2**20:.2f} MiB")
    if total > SIZE_LIMIT:
        common.fail(f"the three checkpoints take {total} bytes, over the 16 MiB limit")


if __name__ == "__main__":
    main()
