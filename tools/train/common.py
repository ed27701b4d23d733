"""What the GPU-side training stages share: seeding, the token streams, the target model built from
its config.json the way a hub config is read, and forward hooks on the target's decoder layers."""
import contextlib
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_CONFIG = os.path.join(HERE, "mini_v3_config.json")
DRAFT_CONFIG = os.path.join(HERE, "mini_v3_dflash_config.json")


def log(stage, msg):
    print(f"[{stage} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def device():
    """cuda on the GPU machine; cpu only for smoke-testing the scripts."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def autocast():
    """bf16 autocast on the GPU (training speed); plain float32 elsewhere."""
    if torch.cuda.is_available():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def read_stream(path):
    """A uint16 token stream (prepare_data.py) as an int64 tensor."""
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


def read_json(path):
    with open(path) as f:
        return json.load(f)


def build_target(config_dict, attn="sdpa"):
    """DeepseekV3ForCausalLM from a config dict, random-initialised (transformers' own init)."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM
    config = DeepseekV3Config.from_dict(dict(config_dict))
    config._attn_implementation = attn
    return DeepseekV3ForCausalLM(config)


def windows(stream, starts, length):
    """[len(starts), length] token windows of a stream."""
    idx = starts.unsqueeze(1) + torch.arange(length).unsqueeze(0)
    return stream[idx]


class LayerOutputs:
    """Keeps the raw output (the residual stream after the layer) of chosen decoder layers."""

    def __init__(self, model, layer_ids):
        self.outputs = {}
        self.handles = [model.model.layers[i].register_forward_hook(self._hook(i)) for i in layer_ids]

    def _hook(self, index):
        def hook(_module, _inputs, output):
            self.outputs[index] = output[0] if isinstance(output, tuple) else output
        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def fail(msg):
    print(f"error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


class StepBudget:
    """--steps N, or --steps auto:SECONDS: time steps probe..2*probe (after the first steps' one-off
    costs), then fix the total so the whole run takes about SECONDS. The learning-rate warm-up
    has a fixed length, so the schedule of the probe steps does not depend on the total and a
    rerun with --steps N (the logged total) follows the same schedule."""

    def __init__(self, spec, probe=20):
        self.auto_seconds = float(spec.split(":", 1)[1]) if str(spec).startswith("auto:") else None
        self.total = None if self.auto_seconds else int(spec)
        self.probe = probe
        self._t = None

    def tick(self, step):
        """Call at the top of every step; returns False when the run is over."""
        if self.total is None and step in (self.probe, 2 * self.probe):
            if torch.cuda.is_available():
                torch.cuda.synchronize()  # time the GPU's work, not the host running ahead of it
            if step == self.probe:
                self._t = time.time()
            else:
                per_step = (time.time() - self._t) / self.probe
                self.total = max(2 * self.probe + 1, int(self.auto_seconds / per_step))
        return self.total is None or step < self.total

    def cosine_total(self, guess):
        """The total for the cosine schedule: known after the probe, else a provisional guess."""
        return self.total if self.total is not None else guess

    def lr(self, step, peak, floor, warmup=100):
        """Linear warm-up over `warmup` steps, then cosine decay from `peak` to `floor` * peak by
        the last step (the total is provisionally 10 * warmup until the probe has fixed it)."""
        if step < warmup:
            return peak * (step + 1) / warmup
        total = self.cosine_total(10 * warmup)
        t = min(1.0, (step - warmup) / max(1, total - warmup))
        return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))
