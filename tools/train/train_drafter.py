#!/usr/bin/env python3
"""Stage 3 (GPU): self-distil a DFlash block-diffusion drafter against the frozen mini-v3 target.

  python3 tools/train/train_drafter.py --data DATA --target MODELS/mini-v3 --work WORK [--seed 1] [--steps N|auto:S]

1. Distillation data: the target's own greedy continuations (CONT tokens) of PROMPT-token windows
   of the train stream (and, for validation only, of the held-out stream). Acceptance is about
   predicting the target, so the drafter learns the target's choices, not the corpus.
2. The objective (DFlash): pick random anchor positions a in each continuation; the block is the
   token at a followed by block_size-1 mask tokens at positions a..a+B-1, embedded with the
   target's (frozen) embed_tokens; the context is the target's layer outputs at target_layer_ids
   for positions < a, through fc + hidden_norm; the block attends to that context and, without a
   causal mask, to itself; the target's (frozen) lm_head reads block index k, which is trained to
   predict token a+k (k = 1..B-1), with loss weight exp(-(k-1)/gamma).
   Many anchors of one sequence are trained in one pass: their blocks are laid side by side and an
   attention mask gives each block exactly the keys the drafter sees at inference. The model is
   tools/device/dflash_reference.py's DFlashDrafter (kplan's drafter oracle, checked against kplan
   by the goldens); before training, the masked pass is checked equal to that module's own
   forward on one anchor, so what is trained is what kplan runs.
Writes WORK/drafter.pt and WORK/drafter_log.json (losses, per-depth accuracy on held-out prompts,
the chain acceptance length it implies). The held-out continuations are generated in float32 (as
kplan decodes); the shipped drafter's log measured them under bf16 autocast (models/README.md).
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "device"))
import common  # noqa: E402
import dflash_reference  # noqa: E402

PROMPT = 64
CONT = 192  # set from --continuation


@torch.no_grad()
def greedy_continuations(target, stream, count, seed, device, batch=4096, exact=False):
    """[count, PROMPT + CONT] token rows: a window of the stream, then the target's greedy tokens
    (KV-cached greedy decoding; EOS does not stop it: the target's own choice after EOS is kept).
    exact: float32 without TF32, the numerics kplan decodes with (default: bf16 autocast, the
    shipped drafter's recipe)."""
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, stream.numel() - PROMPT - 1, (count,), generator=g)
    rows = []
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32 and not exact
    for chunk in starts.split(batch):
        seq = common.windows(stream, chunk, PROMPT).to(device)
        with (contextlib.nullcontext() if exact else common.autocast()):
            out = target.generate(input_ids=seq, attention_mask=torch.ones_like(seq), max_new_tokens=CONT,
                                  min_new_tokens=CONT, do_sample=False, eos_token_id=None, pad_token_id=0)
        if out.shape[1] != PROMPT + CONT:
            common.fail(f"generate returned {out.shape[1]} positions, wanted {PROMPT + CONT}")
        rows.append(out.cpu())
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return torch.cat(rows)


def load_target(target_dir, device):
    """The shipped target as transformers loads it (bf16 file, float32 weights), frozen."""
    from transformers import DeepseekV3ForCausalLM
    model = DeepseekV3ForCausalLM.from_pretrained(target_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.generation_config.eos_token_id = None
    return model.to(device).eval().requires_grad_(False)


def context_features(target, hooks, layer_ids, seq):
    """The concatenated raw outputs of the target's layers layer_ids at every position of seq."""
    with torch.no_grad(), common.autocast():
        target(input_ids=seq)
    return torch.cat([hooks.outputs[i].float() for i in layer_ids], dim=-1)


def masked_block_forward(drafter, feats, block_embeds, anchors, block_size):
    """The drafter on K blocks per sequence at once. feats [b, L, n*h]: target layer outputs of
    every position; block_embeds [b, K*B, h]; anchors [b, K] (block k sits at positions
    anchors[k] .. +B-1 and sees context positions < anchors[k]). Returns final-normed states
    [b, K*B, h]."""
    b, L, _ = feats.shape
    K = anchors.shape[1]
    T = K * block_size
    dev = feats.device
    ctx = drafter.hidden_norm(drafter.fc(feats))
    offsets = torch.arange(block_size, device=dev)
    blk_pos = (anchors.unsqueeze(-1) + offsets).reshape(b, T)
    ctx_pos = torch.arange(L, device=dev).unsqueeze(0).expand(b, L)
    cos_c, sin_c = drafter.rotary_emb(block_embeds, ctx_pos)
    cos_b, sin_b = drafter.rotary_emb(block_embeds, blk_pos)
    # mask [b, 1, T, L + T]: context j visible iff j < anchor of the query's block; block keys
    # visible iff same block.
    q_anchor = anchors.repeat_interleave(block_size, dim=1)  # [b, T]
    ctx_vis = torch.arange(L, device=dev).view(1, 1, L) < q_anchor.unsqueeze(-1)
    blk_id = torch.arange(T, device=dev) // block_size
    blk_vis = (blk_id.view(T, 1) == blk_id.view(1, T)).unsqueeze(0).expand(b, T, T)
    mask = torch.cat([ctx_vis, blk_vis], dim=-1).unsqueeze(1)
    h = block_embeds
    for layer in drafter.layers:
        attn = layer.self_attn
        x = layer.input_layernorm(h)
        hd, nh, nkv = attn.head_dim, attn.heads, attn.kv_heads
        q = attn.q_norm(attn.q_proj(x).view(b, T, nh, hd)).transpose(1, 2)
        kc = attn.k_norm(attn.k_proj(ctx).view(b, L, nkv, hd)).transpose(1, 2)
        kb = attn.k_norm(attn.k_proj(x).view(b, T, nkv, hd)).transpose(1, 2)
        vc = attn.v_proj(ctx).view(b, L, nkv, hd).transpose(1, 2)
        vb = attn.v_proj(x).view(b, T, nkv, hd).transpose(1, 2)
        q = dflash_reference.apply_rope(q, cos_b, sin_b)
        kc = dflash_reference.apply_rope(kc, cos_c, sin_c)
        kb = dflash_reference.apply_rope(kb, cos_b, sin_b)
        k = torch.cat([kc, kb], dim=2).repeat_interleave(nh // nkv, dim=1)
        v = torch.cat([vc, vb], dim=2).repeat_interleave(nh // nkv, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=hd ** -0.5)
        h = h + attn.o_proj(out.transpose(1, 2).reshape(b, T, nh * hd))
        h = h + layer.mlp(layer.post_attention_layernorm(h))
    return drafter.norm(h)


def sample_anchors(b, K, length, block_size, g):
    """K distinct anchors per row in [PROMPT, length - block_size]."""
    span = length - block_size - PROMPT + 1
    keys = torch.rand(b, span, generator=g)
    return keys.topk(K, dim=1)[1].sort(dim=1)[0] + PROMPT


def block_inputs(rows, anchors, block_size, mask_id):
    """Block tokens [b, K*B] (anchor token, then mask tokens) and labels [b, K, B-1]."""
    b, K = anchors.shape
    first = rows.gather(1, anchors)
    tokens = torch.full((b, K, block_size), mask_id, dtype=rows.dtype, device=rows.device)
    tokens[:, :, 0] = first
    label_idx = anchors.unsqueeze(-1) + torch.arange(1, block_size, device=rows.device)
    labels = rows.gather(1, label_idx.reshape(b, -1)).reshape(b, K, block_size - 1)
    return tokens.reshape(b, K * block_size), labels


def check_masked_equals_reference(drafter, target, hooks, layer_ids, rows, block_size, mask_id, device):
    """The training pass and dflash_reference's forward agree on one anchor (float32, no TF32)."""
    seq = rows[:1].to(device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        target(input_ids=seq)
        feats = torch.cat([hooks.outputs[i].float() for i in layer_ids], dim=-1)
        anchors = torch.tensor([[PROMPT + 1, seq.shape[1] - block_size]], device=device)
        tokens, _ = block_inputs(seq, anchors, block_size, mask_id)
        embeds = target.model.embed_tokens(tokens).float()
        masked = masked_block_forward(drafter, feats, embeds, anchors, block_size)
        for k in range(2):
            a = int(anchors[0, k])
            ref = drafter(feats[:, :a], embeds[:, k * block_size:(k + 1) * block_size])
            err = (ref - masked[:, k * block_size:(k + 1) * block_size]).abs().max().item()
            if not err < 1e-4:
                common.fail(f"masked training pass differs from the reference drafter by {err}")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    return err


@torch.no_grad()
def depth_accuracy(drafter, target, hooks, layer_ids, rows, block_size, mask_id, device, seed, length=None):
    """Per block index k: how often the drafter's argmax equals the target's greedy token, and the
    chain acceptance length 1 + E[leading matches], over anchors of held-out continuations."""
    g = torch.Generator().manual_seed(seed)
    correct = torch.zeros(block_size - 1)
    leading = 0.0
    n = 0
    for chunk in rows.split(64):
        seq = chunk.to(device)
        feats = context_features(target, hooks, layer_ids, seq)
        anchors = sample_anchors(seq.shape[0], 8, length or seq.shape[1], block_size, g).to(device)
        tokens, labels = block_inputs(seq, anchors, block_size, mask_id)
        embeds = target.model.embed_tokens(tokens).float()
        with common.autocast():
            states = masked_block_forward(drafter, feats, embeds, anchors, block_size)
            logits = target.lm_head(states.view(seq.shape[0], -1, block_size, states.shape[-1])[:, :, 1:])
        hit = logits.float().argmax(-1) == labels  # [b, K, B-1]
        correct += hit.float().sum(dim=(0, 1)).cpu()
        leading += hit.int().cumprod(dim=-1).sum().item()
        n += hit.shape[0] * hit.shape[1]
    return (correct / n).tolist(), 1.0 + leading / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--target", required=True, help="the exported target checkpoint (MODELS/mini-v3)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", default="6000", help="N, or auto:SECONDS")
    ap.add_argument("--sequences", type=int, default=65536)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--anchors", type=int, default=12)
    ap.add_argument("--val-sequences", type=int, default=512)
    ap.add_argument("--continuation", type=int, default=192)
    ap.add_argument("--exact-distillation", action="store_true",
                    help="generate the continuations in float32 (kplan's numerics) instead of bf16 autocast")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--gamma", type=float, default=7.0)
    args = ap.parse_args()
    global CONT
    CONT = args.continuation
    device = common.device()
    common.seed_everything(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True

    target = load_target(args.target, device)
    raw, fields = dflash_reference.read_draft_config(_config_dir(args.work))
    config = dflash_reference.qwen3_config_from(raw)
    drafter = dflash_reference.DFlashDrafter(config, fields).to(device)
    block_size, mask_id, layer_ids = fields["block_size"], fields["mask_token_id"], fields["target_layer_ids"]
    hooks = common.LayerOutputs(target, layer_ids)

    t0 = time.time()
    train = common.read_stream(os.path.join(args.data, "train.u16"))
    held = common.read_stream(os.path.join(args.data, "heldout.u16"))
    rows = greedy_continuations(target, train, args.sequences, args.seed + 10, device, exact=args.exact_distillation)
    val_rows = greedy_continuations(target, held, args.val_sequences, args.seed + 11, device, exact=True)
    gen_seconds = time.time() - t0
    common.log("drafter", f"distillation data: {rows.shape[0]} x {rows.shape[1]} tokens in {gen_seconds:.0f} s")
    err = check_masked_equals_reference(drafter, target, hooks, layer_ids, rows, block_size, mask_id, device)
    common.log("drafter", f"masked pass == reference forward (max |diff| {err:.2e})")

    params = [p for p in drafter.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    budget = common.StepBudget(args.steps)
    weights = torch.exp(-torch.arange(block_size - 1, dtype=torch.float32) / args.gamma).to(device)
    g = torch.Generator().manual_seed(args.seed + 12)
    history = []
    t1 = time.time()
    drafter.train()
    step = 0
    while budget.tick(step):
        lr = budget.lr(step, args.lr, floor=0.05)
        for group in opt.param_groups:
            group["lr"] = lr
        pick = torch.randint(0, rows.shape[0], (args.batch,), generator=g)
        seq = rows[pick].to(device, non_blocking=True)
        feats = context_features(target, hooks, layer_ids, seq)
        anchors = sample_anchors(args.batch, args.anchors, seq.shape[1], block_size, g).to(device)
        tokens, labels = block_inputs(seq, anchors, block_size, mask_id)
        with torch.no_grad():
            embeds = target.model.embed_tokens(tokens).float()
        with common.autocast():
            states = masked_block_forward(drafter, feats, embeds, anchors, block_size)
            states = states.view(args.batch, args.anchors, block_size, -1)[:, :, 1:]
            logits = target.lm_head(states)
        ce = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                             reduction="none").view(args.batch, args.anchors, block_size - 1)
        loss = (ce * weights).sum(-1).mean() / weights.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 250 == 0 or step + 1 == budget.total:
            entry = {"step": step, "loss": round(loss.item(), 4), "lr": lr, "seconds": round(time.time() - t1, 1)}
            history.append(entry)
            common.log("drafter", json.dumps(entry))
        step += 1
    train_seconds = time.time() - t1
    drafter.eval()
    acc, chain_tau = depth_accuracy(drafter, target, hooks, layer_ids, val_rows, block_size, mask_id, device, args.seed + 13)
    _, early_tau = depth_accuracy(drafter, target, hooks, layer_ids, val_rows, block_size, mask_id, device,
                                  args.seed + 14, length=PROMPT + 64 + block_size)
    common.log("drafter", f"held-out per-depth accuracy {[round(a, 3) for a in acc]}; "
                          f"chain acceptance length {chain_tau:.3f} (anchors in the first 64 generated: {early_tau:.3f})")
    torch.save(drafter.state_dict(), os.path.join(args.work, "drafter.pt"))
    with open(os.path.join(args.work, "drafter_log.json"), "w") as f:
        json.dump({"args": vars(args), "steps": step, "parameters": n_params, "distill_rows": list(rows.shape),
                   "distill_seconds": gen_seconds, "train_seconds": train_seconds,
                   "heldout_depth_accuracy": acc, "heldout_chain_acceptance": chain_tau, "heldout_chain_acceptance_first64": early_tau,
                   "masked_vs_reference_max_diff": err, "history": history}, f, indent=2)


def _config_dir(work):
    """dflash_reference reads DIR/config.json: stage the drafter's config there."""
    d = os.path.join(work, "drafter_config")
    os.makedirs(d, exist_ok=True)
    with open(common.DRAFT_CONFIG) as src, open(os.path.join(d, "config.json"), "w") as dst:
        dst.write(src.read())
    return d


if __name__ == "__main__":
    main()
