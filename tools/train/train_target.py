#!/usr/bin/env python3
"""Stage 2 (GPU): train the mini-v3 target, transformers' DeepseekV3ForCausalLM, on the corpus.

  python3 tools/train/train_target.py --data DATA --out WORK [--seed 1] [--steps 1500]

Next-token cross-entropy on random windows of the train stream, AdamW with warm-up and cosine
decay, bf16 autocast. The router's e_score_correction_bias is not a gradient parameter: it is
moved after every step by DeepSeek-V3's auxiliary-loss-free balancing rule (bias += u * sign(mean
load - expert load)), so the shipped bias is a real, non-zero one. Writes WORK/target.pt (fp32
state_dict) and WORK/target_log.json (losses, held-out loss, timing).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


class RouterLoads:
    """Counts, per MoE layer, how many tokens each routed expert received in the last forward."""

    def __init__(self, model):
        cfg = model.config
        self.n = cfg.n_routed_experts
        self.k = cfg.num_experts_per_tok
        self.loads = {}
        self.gates = {}
        for i, layer in enumerate(model.model.layers):
            gate = getattr(layer.mlp, "gate", None)
            if gate is not None and hasattr(gate, "e_score_correction_bias"):
                self.gates[i] = gate
                gate.register_forward_hook(self._hook(i))

    def _hook(self, index):
        def hook(module, _inputs, output):
            first = output[0] if isinstance(output, tuple) else output
            with torch.no_grad():
                if first.dtype in (torch.int32, torch.int64):
                    chosen = first
                else:  # router logits or scores [tokens, experts]
                    scores = first.float().reshape(-1, self.n)
                    if scores.min() < 0 or scores.max() > 1:
                        scores = scores.sigmoid()
                    chosen = (scores + module.e_score_correction_bias).topk(self.k, dim=-1)[1]
                self.loads[index] = torch.bincount(chosen.reshape(-1), minlength=self.n).float()
        return hook

    @torch.no_grad()
    def rebalance(self, rate):
        for i, gate in self.gates.items():
            load = self.loads.get(i)
            if load is not None:
                gate.e_score_correction_bias += rate * torch.sign(load.mean() - load)

    def imbalance(self):
        """max load / mean load per MoE layer, of the last forward."""
        return {i: float(l.max() / l.mean()) for i, l in sorted(self.loads.items())}


@torch.no_grad()
def heldout_loss(model, stream, seq, count, seed, device):
    g = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, stream.numel() - seq - 1, (count,), generator=g)
    total, n = 0.0, 0
    model.eval()
    for chunk in starts.split(32):
        x = common.windows(stream, chunk, seq + 1).to(device)
        logits = model(input_ids=x[:, :-1]).logits.float()
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1), reduction="sum").item()
        n += x[:, 1:].numel()
    model.train()
    return total / n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", default="1500", help="N, or auto:SECONDS")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    device = common.device()
    common.seed_everything(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True

    train = common.read_stream(os.path.join(args.data, "train.u16"))
    held = common.read_stream(os.path.join(args.data, "heldout.u16"))
    config = common.read_json(common.TARGET_CONFIG)
    if int(train.max()) >= config["vocab_size"]:
        common.fail("token ids exceed the target's vocab_size")
    model = common.build_target(config).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    common.log("target", f"{n_params} parameters; train {train.numel()} tokens, heldout {held.numel()}")
    loads = RouterLoads(model)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    budget = common.StepBudget(args.steps)

    def lr_at(step):
        return budget.lr(step, args.lr, floor=0.1)

    g = torch.Generator().manual_seed(args.seed)
    history = []
    t0 = time.time()
    model.train()
    step = 0
    while budget.tick(step):
        starts = torch.randint(0, train.numel() - args.seq - 1, (args.batch,), generator=g)
        x = common.windows(train, starts, args.seq + 1).to(device, non_blocking=True)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        with common.autocast():
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loads.rebalance(args.bias_rate)
        if step % 100 == 0 or step + 1 == budget.total:
            entry = {"step": step, "loss": round(loss.item(), 4), "lr": lr_at(step),
                     "seconds": round(time.time() - t0, 1), "imbalance": loads.imbalance()}
            history.append(entry)
            common.log("target", json.dumps(entry))
        step += 1
    train_seconds = time.time() - t0
    held_loss = heldout_loss(model, held, args.seq, 256, args.seed + 1, device)
    train_loss = heldout_loss(model, train, args.seq, 256, args.seed + 2, device)
    common.log("target", f"{step} steps; held-out loss {held_loss:.4f} (ppl {math.exp(held_loss):.2f}), "
                         f"train loss {train_loss:.4f}, {train_seconds:.0f} s")
    torch.save(model.state_dict(), os.path.join(args.out, "target.pt"))
    with open(os.path.join(args.out, "target_log.json"), "w") as f:
        json.dump({"args": vars(args), "steps": step, "parameters": n_params, "heldout_loss": held_loss,
                   "train_loss": train_loss, "train_seconds": train_seconds, "history": history,
                   "torch": torch.__version__}, f, indent=2)


if __name__ == "__main__":
    main()
