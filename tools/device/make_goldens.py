#!/usr/bin/env python3
"""Golden outputs for kplan's CPU reference backend, from HuggingFace transformers' own
DeepseekV3ForCausalLM (and, for the drafter, tools/device/dflash_reference.py).

Runs on the GPU machine (it has torch + transformers; this machine has not). One call makes one
golden file for one synthesised checkpoint; tools/device/goldens.sh lists the cases and the exact
`kplan synth` commands that make the checkpoints. Format: /tmp/kplan_team/COMMON.md ("Golden
files") and tests/data/goldens/README.md.

  python3 tools/device/make_goldens.py --case tiny --ckpt DIR --synth-args "tiny --seed 1" \
      [--draft DIR --draft-synth-args "..."] --out tiny.json [--device cpu|cuda]

Per prompt: logits at the first, middle and last prompt positions; 16 greedy ids (KV cache, not
stopped at eos); the outputs of a few decoder layers at the last position. Per drafter: the
drafter's logits at block indices 1..block_size-1 for one context (see draft_golden).

Everything is float32: weights are upcast when loaded, attention is the eager implementation, the
MoE experts use the eager (per-expert loop) implementation, and on CUDA TF32 is switched off.

What transformers 5.x's deepseek_v3 does where implementations differ (read in its
modular_deepseek_v3.py / modeling_rope_utils.py; the CPU backend must match; the JSON's "hf_facts"
records what the loaded model actually holds):
  * q_a_layernorm and kv_a_layernorm are built as DeepseekV3RMSNorm(dim) with the class default
    eps 1e-6, NOT config.rms_norm_eps (matters for tiny2: rms_norm_eps 1e-5). The decoder's
    input/post-attention norms and the final norm use rms_norm_eps.
  * rope_interleave defaults to True: the rope slices of q and k are de-interleaved (even lanes,
    then odd lanes) and rotated with rotate_half, i.e. GPT-J style rotation of adjacent pairs
    (2i, 2i+1) by frequency i. cos/sin = cat(freqs, freqs) * attention_scaling, in float32.
    The RoPE dim is head_dim = qk_rope_head_dim.
  * rope_scaling from config.json is read as rope_parameters ("type" standardised to
    "rope_type"). YaRN: inv_freq = interp*(1-e) + extrap*e with e = 1 - ramp(low, high) over
    dim/2 lanes; low/high = floor/ceil of the correction dims for beta_fast/beta_slow computed
    with original_max_position_embeddings (truncate defaults to True), clamped to [0, dim-1];
    pos_freqs = theta ** (arange(0, dim, 2) / dim) in float32. cos/sin amplitude
    (attention_factor) = mscale(f, mscale) / mscale(f, mscale_all_dim) when both are set, else
    0.1*ln(f)+1 (1.0 for tiny-yarn). Softmax scale = qk_head_dim^-0.5 * m^2 with
    m = 0.1*mscale_all_dim*ln(factor)+1, only when rope_type != default and mscale_all_dim != 0.
  * Router: sigmoid(x @ W^T) in float32; choice scores = scores + e_score_correction_bias;
    group score = sum of the top-2 choice scores in each group; keep topk_group groups; experts
    of other groups get choice score 0.0 (masked_fill with 0.0, not -inf); top-k of the choice
    scores; weights = the UNBIASED scores of the chosen experts, divided by (sum + 1e-20) when
    norm_topk_prob, then times routed_scaling_factor (also when norm_topk_prob is false).
    The shared experts (intermediate moe_intermediate_size * n_shared_experts) are added unscaled.
  * A layer is MoE when layer >= first_k_dense_replace (moe_layer_freq is not read).
  * output_hidden_states: hidden_states[0] is the embedding output, hidden_states[l+1] the output
    of decoder layer l, EXCEPT the last entry, which transformers replaces by the final-normed
    state. The goldens therefore take each decoder layer's output from a forward hook on the
    layer ("hidden" and the drafter's context features are raw layer outputs); "hf_facts" says
    whether hidden_states[-1] differed from the hooked last-layer output.

INT4 (pack-quantized) checkpoints: transformers needs the compressed-tensors package to read them,
and the GPU machine has none. So they are dequantised here exactly as compressed-tensors does —
w[r, c] = (nibble(c) - 8) * scale[r, c // 32], nibble c = bits 4*(c%8).. of int32 column c//8
(low nibble first) — into a float32 copy of the checkpoint whose config has no
quantization_config, and that copy is loaded by DeepseekV3ForCausalLM.
"""
import argparse
import hashlib
import json
import math
import os
import random
import shutil
import sys
import tempfile

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import DeepseekV3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflash_reference  # noqa: E402

GREEDY_NEW = 16
N_PROMPTS = 3
CANDIDATE_PROMPTS = 12
MIN_GREEDY_GAP = 1e-3  # a prompt whose greedy choices come closer than this is passed over


def set_exact_float32():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checkpoint_hashes(ckpt_dir):
    return {name: sha256_of(os.path.join(ckpt_dir, name))
            for name in sorted(os.listdir(ckpt_dir))
            if name.endswith((".json", ".safetensors"))}


def round9(values):
    """Floats with 9 significant digits (enough to round-trip a float32); refuses NaN/inf."""
    if not all(math.isfinite(v) for v in values):
        raise RuntimeError("non-finite value in a golden row")
    return [float(f"{v:.9g}") for v in values]


# ---------------------------------------------------------------------------------------------
# INT4 dequantisation (compressed-tensors pack-quantized, symmetric, group 32)
# ---------------------------------------------------------------------------------------------

def quant_group_size(qcfg):
    groups = qcfg.get("config_groups", {})
    for group in groups.values():
        w = group.get("weights", {})
        if w.get("num_bits", 4) != 4 or not w.get("symmetric", True):
            raise ValueError(f"unsupported quantization scheme: {w}")
        return int(w.get("group_size", 32))
    return 32


def unpack_int4(packed, scale, shape, group):
    """packed int32 [out, in/8] (8 nibbles per int32 along the input dim, low nibble first, each
    stored as q+8), scale [out, in/group] -> float32 weight [out, in]."""
    out_dim, in_dim = int(shape[0]), int(shape[1])
    shifts = torch.arange(0, 32, 4, dtype=torch.int32)
    nibbles = (packed.to(torch.int32).unsqueeze(-1) >> shifts) & 0xF  # [out, in/8, 8]
    q = nibbles.reshape(out_dim, -1)[:, :in_dim].to(torch.float32) - 8.0
    s = scale.to(torch.float32).repeat_interleave(group, dim=1)[:, :in_dim]
    return q * s


def dequantised_copy(ckpt_dir, dst_dir):
    """Writes dst_dir/{config.json, model.safetensors}: the checkpoint with every pack-quantized
    weight replaced by its float32 dequantisation and quantization_config removed."""
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        config = json.load(f)
    qcfg = config.pop("quantization_config")
    if qcfg.get("format", "pack-quantized") != "pack-quantized":
        raise ValueError(f"unsupported quantization format {qcfg.get('format')}")
    group = quant_group_size(qcfg)
    tensors = {}
    for name in sorted(os.listdir(ckpt_dir)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(ckpt_dir, name)))
    out, n_quant = {}, 0
    for name, t in tensors.items():
        if name.endswith(".weight_packed"):
            base = name[: -len("_packed")]
            out[base] = unpack_int4(t, tensors[base + "_scale"], tensors[base + "_shape"].tolist(), group)
            n_quant += 1
        elif name.endswith((".weight_scale", ".weight_shape")):
            continue
        else:
            out[name] = t.contiguous()
    os.makedirs(dst_dir, exist_ok=True)
    with open(os.path.join(dst_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_file(out, os.path.join(dst_dir, "model.safetensors"), metadata={"format": "pt"})
    return n_quant, group


# ---------------------------------------------------------------------------------------------
# Target model
# ---------------------------------------------------------------------------------------------

def load_target(ckpt_dir, device, notes):
    """DeepseekV3ForCausalLM in float32 with eager attention and eager experts. Refuses a load
    that left any parameter missing or any checkpoint tensor unused, or whose weights are not
    the checkpoint's."""
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        config = json.load(f)
    load_dir, tmp = ckpt_dir, None
    if "quantization_config" in config:
        try:
            import compressed_tensors  # noqa: F401
            notes["compressed_tensors_installed"] = True
        except ImportError:
            notes["compressed_tensors_installed"] = False
        tmp = tempfile.mkdtemp(prefix="dequant-")
        n_quant, group = dequantised_copy(ckpt_dir, tmp)
        notes["int4_loader"] = (f"dequantised in Python ({n_quant} pack-quantized weights, group {group}: "
                                "(nibble-8)*scale, low nibble first) into a float32 checkpoint without "
                                "quantization_config, loaded by DeepseekV3ForCausalLM")
        load_dir = tmp
    kwargs = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    try:
        model, info = DeepseekV3ForCausalLM.from_pretrained(load_dir, experts_implementation="eager", **kwargs)
    except TypeError:
        model, info = DeepseekV3ForCausalLM.from_pretrained(load_dir, **kwargs)
    problems = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if problems:
        raise RuntimeError(f"{ckpt_dir}: transformers did not load the checkpoint cleanly: {problems}")
    model = model.to(device=device, dtype=torch.float32).eval()
    if hasattr(model.config, "_experts_implementation"):
        if model.config._experts_implementation not in (None, "eager"):
            model.config._experts_implementation = "eager"
        notes["experts_implementation"] = str(model.config._experts_implementation)
    notes["attn_implementation"] = str(model.config._attn_implementation)
    check_weights_match(model, load_dir, config)
    check_default_rope(model.model.rotary_emb, config, f"{ckpt_dir}/config.json")
    if tmp:
        shutil.rmtree(tmp)
    return model


def check_weights_match(model, load_dir, config):
    """Checks that the loaded float32 weights are the checkpoint's: embedding, lm_head, the last
    layer's o_proj, the first MoE layer's router bias, and its expert 0 (whatever layout
    transformers fused the experts into)."""
    tensors = {}
    for name in sorted(os.listdir(load_dir)):
        if name.endswith(".safetensors"):
            tensors.update(load_file(os.path.join(load_dir, name)))
    last = config["num_hidden_layers"] - 1
    moe = config["first_k_dense_replace"]
    layers = model.model.layers
    pairs = [
        ("model.embed_tokens.weight", model.model.embed_tokens.weight),
        ("lm_head.weight", model.lm_head.weight),
        (f"model.layers.{last}.self_attn.o_proj.weight", layers[last].self_attn.o_proj.weight),
        (f"model.layers.{moe}.mlp.gate.e_score_correction_bias", layers[moe].mlp.gate.e_score_correction_bias),
    ]
    experts = layers[moe].mlp.experts
    pre = f"model.layers.{moe}.mlp.experts.0."
    gate, up, down = (tensors[pre + p + ".weight"].to(torch.float32) for p in ("gate_proj", "up_proj", "down_proj"))
    if hasattr(experts, "gate_up_proj"):
        fused_gate_up = experts.gate_up_proj[0].detach().cpu()
        fused_down = experts.down_proj[0].detach().cpu()
        want_gate_up = torch.cat([gate, up], dim=0)
        if fused_gate_up.shape != want_gate_up.shape:  # stored transposed
            fused_gate_up, fused_down = fused_gate_up.t(), fused_down.t()
        pairs += [("experts.0 gate_proj;up_proj (fused)", fused_gate_up, want_gate_up),
                  ("experts.0 down_proj (fused)", fused_down, down)]
    else:
        pairs += [(pre + "gate_proj.weight", experts[0].gate_proj.weight),
                  (pre + "down_proj.weight", experts[0].down_proj.weight)]
    for entry in pairs:
        name, param = entry[0], entry[1]
        want = entry[2] if len(entry) == 3 else tensors[name].to(torch.float32)
        got = param.detach().to("cpu", torch.float32)
        if want.shape != got.shape or not torch.equal(want, got):
            raise RuntimeError(f"{load_dir}: loaded {name} differs from the checkpoint")


def check_default_rope(rotary_emb, config, source):
    """Without rope scaling, inv_freq must be 1 / theta^(2i/d) for the config's own theta (so a
    theta the library failed to read cannot pass unnoticed)."""
    if config.get("rope_scaling"):
        return
    inv = rotary_emb.inv_freq.detach().cpu().to(torch.float64)
    d = 2 * inv.numel()
    want = 1.0 / (float(config.get("rope_theta", 10000.0)) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    if not torch.allclose(inv, want, rtol=1e-6, atol=0):
        raise RuntimeError(f"{source}: transformers' rope inv_freq {inv.tolist()} is not the config theta's")


class LayerOutputs:
    """Forward hooks that keep each decoder layer's output (the raw residual stream after the
    layer) of the most recent forward."""

    def __init__(self, model):
        self.outputs = {}
        self.handles = [layer.register_forward_hook(self._hook(i)) for i, layer in enumerate(model.model.layers)]

    def _hook(self, index):
        def hook(_module, _inputs, output):
            self.outputs[index] = (output[0] if isinstance(output, tuple) else output).detach()
        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def hf_facts(model, hooks, ids, device):
    """What the loaded transformers model actually holds where implementations differ."""
    cfg = model.config
    attn = model.model.layers[0].self_attn
    rot = model.model.rotary_emb
    facts = {
        "rope_interleave": bool(getattr(cfg, "rope_interleave", False)),
        "rope_parameters": {k: (v if isinstance(v, (int, float, str, bool)) or v is None else str(v))
                            for k, v in dict(getattr(cfg, "rope_parameters", None) or {}).items()},
        "rope_inv_freq": round9(rot.inv_freq.detach().cpu().tolist()),
        "rope_attention_scaling": float(rot.attention_scaling),
        "softmax_scale": float(attn.scaling),
        "kv_a_layernorm_eps": float(attn.kv_a_layernorm.variance_epsilon),
        "rms_norm_eps": float(cfg.rms_norm_eps),
    }
    if getattr(attn, "q_a_layernorm", None) is not None:
        facts["q_a_layernorm_eps"] = float(attn.q_a_layernorm.variance_epsilon)
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), output_hidden_states=True, use_cache=False)
    last = len(model.model.layers) - 1
    raw_last = hooks.outputs[last]
    facts["hidden_states_count"] = len(out.hidden_states)
    facts["hidden_states_last_is_raw_layer_output"] = bool(torch.equal(out.hidden_states[-1], raw_last))
    with torch.no_grad():
        facts["hidden_states_last_is_final_norm"] = bool(torch.equal(out.hidden_states[-1], model.model.norm(raw_last)))
    return facts


def greedy(model, ids, device, n_new):
    """Greedy decode with transformers' KV cache: prefill, then one token per step. Returns the
    new ids and, for each chosen token, the gap between its logit and the runner-up's."""
    new, gaps = [], []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids], device=device), use_cache=True)
        while True:
            top2 = torch.topk(out.logits[0, -1], 2)
            gaps.append(float(top2.values[0] - top2.values[1]))
            new.append(int(top2.indices[0]))
            if len(new) == n_new:
                return new, gaps
            out = model(input_ids=torch.tensor([[new[-1]]], device=device),
                        past_key_values=out.past_key_values, use_cache=True)


def greedy_matches_uncached(model, ids, new, device):
    """Whether the cached greedy ids equal the argmax of one uncached forward over the whole
    sequence (the KV-cache path and the prefill path agree)."""
    with torch.no_grad():
        full = model(input_ids=torch.tensor([ids + new[:-1]], device=device), use_cache=False).logits[0]
    return full[len(ids) - 1:].argmax(-1).tolist() == new


def candidate_prompts(seed, vocab, specials):
    rng = random.Random(seed)
    allowed = [t for t in range(vocab) if t not in specials]
    for _ in range(CANDIDATE_PROMPTS):
        n = rng.randint(5, 12)
        yield [rng.choice(allowed) for _ in range(n)]


def prompt_golden(model, hooks, ids, device, hidden_layers):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device=device), use_cache=False).logits[0]
    layer_outputs = {l: hooks.outputs[l][0] for l in hidden_layers}
    positions = sorted({0, len(ids) // 2, len(ids) - 1})
    new, gaps = greedy(model, ids, device, GREEDY_NEW)
    hidden_position = len(ids) - 1
    return {
        "ids": ids,
        "logits_positions": positions,
        "logits": [round9(logits[p].cpu().tolist()) for p in positions],
        "greedy_new": GREEDY_NEW,
        "greedy_ids": new,
        "greedy_min_top2_gap": min(gaps),
        "greedy_matches_uncached": greedy_matches_uncached(model, ids, new, device),
        "hidden_layers": hidden_layers,
        "hidden_position": hidden_position,
        "hidden": [round9(layer_outputs[l][hidden_position].cpu().tolist()) for l in hidden_layers],
    }


def pick_prompts(model, hooks, config, device, seed, hidden_layers):
    """The first N_PROMPTS seeded candidates whose greedy continuation holds no bos/eos and whose
    greedy choices are never near-ties; if too few pass, the best-separated of the rest."""
    eos = config.get("eos_token_id")
    eos = eos if isinstance(eos, list) else [eos]
    specials = {t for t in eos + [config.get("bos_token_id")] if t is not None}
    specials.add(config["vocab_size"] - 1)  # the drafter's mask token
    chosen, spare = [], []
    for ids in candidate_prompts(seed, config["vocab_size"], specials):
        g = prompt_golden(model, hooks, ids, device, hidden_layers)
        ok = (not (set(g["greedy_ids"]) & specials) and g["greedy_min_top2_gap"] >= MIN_GREEDY_GAP
              and g["greedy_matches_uncached"])
        (chosen if ok else spare).append(g)
        if len(chosen) == N_PROMPTS:
            break
    spare.sort(key=lambda g: -g["greedy_min_top2_gap"])
    return chosen + spare[: N_PROMPTS - len(chosen)]


# ---------------------------------------------------------------------------------------------
# Drafter
# ---------------------------------------------------------------------------------------------

def draft_golden(model, hooks, draft_dir, device, context_ids):
    drafter, dcfg, fields = dflash_reference.load_drafter(draft_dir, device)
    with open(os.path.join(draft_dir, "config.json")) as f:
        check_default_rope(drafter.rotary_emb, json.load(f), f"{draft_dir}/config.json")
    n_target = len(model.model.layers)
    if any(i < 0 or i >= n_target for i in fields["target_layer_ids"]):
        raise ValueError(f"{draft_dir}: target_layer_ids {fields['target_layer_ids']} outside 0..{n_target - 1}")
    if dcfg.hidden_size != model.config.hidden_size:
        raise ValueError(f"{draft_dir}: hidden_size {dcfg.hidden_size} != target {model.config.hidden_size}")
    with torch.no_grad():
        out = model(input_ids=torch.tensor([context_ids], device=device), use_cache=False)
        bonus = int(out.logits[0, -1].argmax())
        features = torch.cat([hooks.outputs[i] for i in fields["target_layer_ids"]], dim=-1)
        bs = fields["block_size"]
        block = torch.tensor([[bonus] + [fields["mask_token_id"]] * (bs - 1)], device=device)
        embeds = model.model.embed_tokens(block)
        states = drafter(features, embeds)
        logits = model.lm_head(states)[0]
        context_feature_last = drafter.hidden_norm(drafter.fc(features))[0, -1]
    depth_logits = logits[1:]
    top2 = torch.topk(depth_logits, 2, dim=-1)
    return {
        "context_ids": context_ids,
        "bonus_token": bonus,
        "bonus_position": len(context_ids),
        "block_size": bs,
        "mask_token_id": fields["mask_token_id"],
        "target_layer_ids": fields["target_layer_ids"],
        "logits": [round9(row.cpu().tolist()) for row in depth_logits],
        "context_feature_last": round9(context_feature_last.cpu().tolist()),
        "argmax": top2.indices[:, 0].cpu().tolist(),
        "min_top2_gap": float((top2.values[:, 0] - top2.values[:, 1]).min()),
        "drafter_rope_inv_freq": round9(drafter.rotary_emb.inv_freq.cpu().tolist()),
        "drafter_rope_attention_scaling": float(drafter.rotary_emb.attention_scaling),
    }


# ---------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------

def dumps_compact(obj, indent=0):
    """JSON with one line per list of scalars (a row of logits stays on one line)."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        items = [f"{inner}{json.dumps(k)}: {dumps_compact(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(v, (dict, list)) for v in obj):
        return "[\n" + ",\n".join(inner + dumps_compact(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, separators=(",", ":"))


def compare_goldens(mine, ref_path):
    """Prints how far this run's logits are from another run's file (e.g. CUDA against CPU):
    the largest |a-b| / max|b| over each logits row, and whether greedy and draft ids agree."""
    with open(ref_path) as f:
        ref = json.load(f)
    worst, same_ids = 0.0, True
    rows = []
    for a, b in zip(mine["prompts"], ref["prompts"]):
        if a["ids"] != b["ids"]:
            print(f"compare: prompt {a['ids']} != {b['ids']}; skipped", flush=True)
            continue
        rows += list(zip(a["logits"], b["logits"])) + list(zip(a["hidden"], b["hidden"]))
        same_ids &= a["greedy_ids"] == b["greedy_ids"]
    if "draft" in mine and "draft" in ref:
        rows += list(zip(mine["draft"]["logits"], ref["draft"]["logits"]))
        same_ids &= mine["draft"]["argmax"] == ref["draft"]["argmax"]
    for ra, rb in rows:
        scale = max(abs(v) for v in rb) or 1.0
        worst = max(worst, max(abs(x - y) for x, y in zip(ra, rb)) / scale)
    print(f"compare {mine['case']} ({mine['device']}) vs {ref_path} ({ref.get('device')}): "
          f"max relative difference {worst:.3g}, ids identical: {same_ids}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", required=True)
    ap.add_argument("--ckpt", required=True, help="synthesised target checkpoint directory")
    ap.add_argument("--synth-args", required=True, help="the `kplan synth` arguments that made --ckpt")
    ap.add_argument("--draft", help="synthesised DFlash drafter directory for this target")
    ap.add_argument("--draft-synth-args", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--seed", type=int, default=1234, help="seeds the prompt ids")
    ap.add_argument("--command", default="", help="the command line recorded in the file")
    ap.add_argument("--compare", help="another run's golden file to compare this run against")
    args = ap.parse_args()

    set_exact_float32()
    torch.manual_seed(0)
    device = torch.device(args.device)
    with open(os.path.join(args.ckpt, "config.json")) as f:
        config = json.load(f)
    notes = {}
    model = load_target(args.ckpt, device, notes)
    hooks = LayerOutputs(model)
    n_layers = config["num_hidden_layers"]
    hidden_layers = sorted({0, config["first_k_dense_replace"], n_layers // 2, n_layers - 1})
    prompts = pick_prompts(model, hooks, config, device, args.seed, hidden_layers)
    facts = hf_facts(model, hooks, prompts[0]["ids"], device)
    golden = {
        "case": args.case,
        "synth_args": args.synth_args.split(),
        "checkpoint_sha256": checkpoint_hashes(args.ckpt),
        "command": args.command,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "device": args.device,
        "notes": notes,
        "hf_facts": facts,
        "prompts": prompts,
    }
    if args.draft:
        # Context: the first prompt and the first 4 tokens of its greedy continuation, so the bonus
        # token (the target's greedy choice after the context) is that continuation's 5th token.
        ctx = prompts[0]["ids"] + prompts[0]["greedy_ids"][:4]
        golden["draft"] = {
            "synth_args": args.draft_synth_args.split(),
            "checkpoint_sha256": checkpoint_hashes(args.draft),
            **draft_golden(model, hooks, args.draft, device, ctx),
        }
    hooks.close()
    if args.compare:
        compare_goldens(golden, args.compare)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(dumps_compact(golden) + "\n")
    gaps = [p["greedy_min_top2_gap"] for p in prompts]
    print(f"{args.case}: {len(prompts)} prompts, greedy ids {[p['greedy_ids'] for p in prompts]}, "
          f"min greedy top-2 gap {min(gaps):.3g}"
          + (f", draft argmax {golden['draft']['argmax']} min gap {golden['draft']['min_top2_gap']:.3g}"
             if args.draft else "") + f" -> {args.out}", flush=True)


if __name__ == "__main__":
    main()
