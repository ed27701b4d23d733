"""A PyTorch DFlash block-diffusion drafter, built from transformers' Qwen3 pieces.

The oracle for kplan's DFlash drafter (used by make_goldens.py). It follows the semantics of
z-lab's dflash/model.py (read, not copied):
  * context features = concat of the target's decoder-layer outputs at target_layer_ids, for every
    committed position; then fc (no bias) and hidden_norm (RMSNorm). The features enter each
    layer's K/V as they are: they do NOT pass through the layer's input_layernorm.
  * the block = [bonus token, mask token x (block_size-1)], embedded with the TARGET's
    embed_tokens, at positions p .. p+block_size-1 (p = number of context positions).
  * each layer: x = input_layernorm(h); q = q_norm(q_proj(x)) per head; k = k_norm(k_proj([ctx; x]))
    per head, v = v_proj([ctx; x]); Qwen3 (rotate_half) RoPE on q at the block positions and on k
    at the context positions then the block positions; NON-causal attention (every block query
    sees all context and all block keys), GQA, scale head_dim^-0.5; o_proj; residual;
    post_attention_layernorm; SwiGLU MLP; residual.
  * final norm, then the TARGET's lm_head.

Everything runs in float32. Tensor names in the drafter's safetensors carry no prefix, and this
module's state_dict keys are exactly those names, so loading is strict.
"""
import json
import os

import torch
from torch import nn
from safetensors.torch import load_file
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import (
    Qwen3MLP,
    Qwen3RMSNorm,
    Qwen3RotaryEmbedding,
    rotate_half,
)


def read_draft_config(draft_dir):
    """The drafter's config.json as a dict, plus the DFlash fields pulled out of dflash_config."""
    with open(os.path.join(draft_dir, "config.json")) as f:
        raw = json.load(f)
    dflash = raw.get("dflash_config", {})
    fields = {
        "block_size": int(dflash.get("block_size", raw.get("block_size", 0))),
        "mask_token_id": int(dflash.get("mask_token_id", raw.get("mask_token_id", -1))),
        "target_layer_ids": [int(i) for i in dflash.get("target_layer_ids", raw.get("target_layer_ids", []))],
    }
    if fields["block_size"] < 2 or fields["mask_token_id"] < 0 or not fields["target_layer_ids"]:
        raise ValueError(f"{draft_dir}/config.json: missing block_size, mask_token_id or target_layer_ids")
    return raw, fields


def qwen3_config_from(raw):
    """A Qwen3Config for the drafter's layers, built the way a hub config.json is read (so the
    legacy rope_theta / rope_scaling keys are standardised by transformers itself)."""
    d = {k: v for k, v in raw.items() if k not in ("architectures", "auto_map", "dflash_config")}
    d["model_type"] = "qwen3"
    d.setdefault("hidden_act", "silu")
    d.setdefault("attention_bias", False)
    return Qwen3Config.from_dict(d)


def apply_rope(x, cos, sin):
    """Qwen3-style (rotate_half) rotary embedding. x [b, heads, t, d]; cos/sin [b, t, d]."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return x * cos + rotate_half(x) * sin


class DFlashAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden = config.hidden_size
        self.q_proj = nn.Linear(hidden, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, hidden, bias=False)
        self.q_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)
        self.k_norm = Qwen3RMSNorm(self.head_dim, eps=config.rms_norm_eps)

    def forward(self, x, ctx, cos, sin):
        """x: normed block states [b, T, hidden]; ctx: context features [b, C, hidden];
        cos/sin: [b, C+T, head_dim] for the context positions then the block positions."""
        b, t, _ = x.shape
        c = ctx.shape[1]
        q = self.q_norm(self.q_proj(x).view(b, t, self.heads, self.head_dim)).transpose(1, 2)
        both = torch.cat([ctx, x], dim=1)
        k = self.k_norm(self.k_proj(both).view(b, c + t, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(both).view(b, c + t, self.kv_heads, self.head_dim).transpose(1, 2)
        q = apply_rope(q, cos[:, c:], sin[:, c:])
        k = apply_rope(k, cos, sin)
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        # Non-causal: no mask at all.
        scores = torch.matmul(q, k.transpose(2, 3)) * (self.head_dim ** -0.5)
        probs = torch.softmax(scores.float(), dim=-1)
        out = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
        return self.o_proj(out)


class DFlashLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attn = DFlashAttention(config)
        self.mlp = Qwen3MLP(config)
        self.input_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = Qwen3RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, h, ctx, cos, sin):
        h = h + self.self_attn(self.input_layernorm(h), ctx, cos, sin)
        return h + self.mlp(self.post_attention_layernorm(h))


class DFlashDrafter(nn.Module):
    def __init__(self, config, fields):
        super().__init__()
        self.config = config
        self.block_size = fields["block_size"]
        self.mask_token_id = fields["mask_token_id"]
        self.target_layer_ids = fields["target_layer_ids"]
        hidden = config.hidden_size
        self.fc = nn.Linear(len(self.target_layer_ids) * hidden, hidden, bias=False)
        self.hidden_norm = Qwen3RMSNorm(hidden, eps=config.rms_norm_eps)
        self.layers = nn.ModuleList([DFlashLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = Qwen3RMSNorm(hidden, eps=config.rms_norm_eps)
        self.rotary_emb = Qwen3RotaryEmbedding(config)

    def forward(self, layer_outputs, block_embeds):
        """layer_outputs: [b, C, n_ids*hidden], the concatenated target-layer outputs of the C
        context positions (positions 0..C-1); block_embeds: [b, T, hidden], the target-embedded
        block at positions C..C+T-1. Returns the final-normed block states [b, T, hidden]."""
        b, c, _ = layer_outputs.shape
        t = block_embeds.shape[1]
        ctx = self.hidden_norm(self.fc(layer_outputs))
        positions = torch.arange(c + t, device=block_embeds.device).unsqueeze(0).expand(b, -1)
        cos, sin = self.rotary_emb(block_embeds, positions)
        h = block_embeds
        for layer in self.layers:
            h = layer(h, ctx, cos, sin)
        return self.norm(h)


def load_drafter(draft_dir, device):
    """Builds the drafter from its config.json and loads every *.safetensors file in draft_dir
    strictly (each tensor must be used, each parameter must be present), upcast to float32."""
    raw, fields = read_draft_config(draft_dir)
    config = qwen3_config_from(raw)
    model = DFlashDrafter(config, fields)
    state = {}
    for name in sorted(os.listdir(draft_dir)):
        if name.endswith(".safetensors"):
            state.update(load_file(os.path.join(draft_dir, name)))
    state = {k: v.to(torch.float32) for k, v in state.items()}
    model.load_state_dict(state, strict=True)
    # Qwen3RotaryEmbedding keeps inv_freq as a non-persistent buffer computed at construction.
    return model.to(device=device, dtype=torch.float32).eval(), config, fields
