#!/usr/bin/env python3
"""Checkpoints written by transformers itself, for kplan's loader tests (issue 12 item 3).

Runs on the GPU machine (torch + transformers 5.x; this machine has neither). Builds a small
DeepseekV3ForCausalLM from a seeded config in transformers 5's naming, saves it with
`save_pretrained` in bfloat16 (every tensor bf16, the router's e_score_correction_bias included)
and in float32, then loads each saved directory afresh in float32 and records its logits at
every position of a fixed prompt and 8 greedy ids (KV cache, eager attention and experts, TF32
off). kplan must load both directories as written and match the goldens.

  python3 tools/device/save_pretrained_checkpoints.py --out OUT
      -> OUT/hf-bf16/{config.json, model.safetensors}, OUT/hf-f32/{...}, OUT/hf-goldens.json
"""
import argparse
import json
import math
import os

import torch
import transformers
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

PROMPT = [5, 17, 200, 42, 7, 99, 3, 250, 11, 64]
GREEDY_NEW = 8


def config():
    return DeepseekV3Config(
        vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
        kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, first_k_dense_replace=1,
        routed_scaling_factor=2.5, n_group=2, topk_group=1, norm_topk_prob=True,
        max_position_embeddings=256, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                         "original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0,
                         "mscale": 1.0, "mscale_all_dim": 1.0},
        bos_token_id=0, eos_token_id=1)


def goldens(path):
    model = DeepseekV3ForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        ids = torch.tensor([PROMPT])
        logits = model(ids).logits[0]
        out = model.generate(ids, max_new_tokens=GREEDY_NEW, do_sample=False, min_new_tokens=GREEDY_NEW)
    rows = [[float(f"{v:.9g}") for v in row.tolist()] for row in logits]
    assert all(math.isfinite(v) for row in rows for v in row)
    return {"logits": rows, "greedy_ids": out[0, len(PROMPT):].tolist()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(1)
    model = DeepseekV3ForCausalLM(config()).to(torch.float32)
    with torch.no_grad():  # a router bias that matters, as training leaves one
        for layer in model.model.layers[1:]:
            layer.mlp.gate.e_score_correction_bias.copy_(torch.randn_like(layer.mlp.gate.e_score_correction_bias) * 0.1)
    result = {"transformers": transformers.__version__, "torch": torch.__version__, "prompt": PROMPT, "checkpoints": {}}
    for name, dtype in (("hf-bf16", torch.bfloat16), ("hf-f32", torch.float32)):
        path = os.path.join(a.out, name)
        model.to(dtype).save_pretrained(path, safe_serialization=True)
        model.to(torch.float32)
        saved = json.load(open(os.path.join(path, "config.json")))
        result["checkpoints"][name] = {"config_keys": sorted(saved), **goldens(path)}
    json.dump(result, open(os.path.join(a.out, "hf-goldens.json"), "w"), indent=1)
    print(json.dumps({k: {"greedy": v["greedy_ids"], "keys": v["config_keys"]} for k, v in result["checkpoints"].items()}))


if __name__ == "__main__":
    main()
