#!/usr/bin/env python3
"""Writes the crash corpus: corpus/<target>/crashes/issue12-*, one input per finding of issue 12
that a fuzz target can be fed (the findings about paths, FIFOs and CLI flags have unit tests
instead: tests/unit/frontend/hostile_paths_test.cc, tests/unit/cli). Each input crashed, or made
the target report a finding, before its fix; tests/fuzz/run.sh replays them all and fails if one
does again. Deterministic; the plan inputs are built from the committed plan seed.

    python3 tests/fuzz/make_crash_inputs.py
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
DEPTH = 50000  # nesting that overflowed the stack (a recursive walk: ~100+ bytes a level)


def put(target, name, data):
    d = os.path.join(CORPUS, target, "crashes")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def nested(depth=DEPTH):
    return "[" * depth + "]" * depth


def seed(target, name):
    with open(os.path.join(CORPUS, target, "seeds", name), "rb") as f:
        return f.read()


# --- .kplan reader ---------------------------------------------------------------------------
# prefix: magic, version u32, flatbuffer_size, data_offset, data_size, flatbuffer_checksum,
# reserved[2], prefix_checksum (the fuzz target reseals both checksums, as a crafted file would).
plan = bytearray(seed("plan_reader", "micro-pair.plan"))
magic, version, fb_size, data_offset, data_size = struct.unpack_from("<4sIQQQ", plan, 0)
# data_offset + data_size wraps past 2^64 and lands inside the file: the range check passed and
# the checksum pass read far out of bounds (SIGSEGV in XXH3).
wrap = bytearray(plan)
struct.pack_into("<Q", wrap, 24, (1 << 64) - data_offset + 4096)
put("plan_reader", "issue12-data-section-size-wraps", bytes(wrap))
# a metadata (FlatBuffer) size that wraps 64 + size past 2^64 (SIGBUS, also under --no-verify).
fbwrap = bytearray(plan)
struct.pack_into("<Q", fbwrap, 8, (1 << 64) - 32)
put("plan_reader", "issue12-metadata-size-wraps", bytes(fbwrap))

# --- safetensors header ----------------------------------------------------------------------
def safetensors(header_text, data=b""):
    h = header_text.encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


put("safetensors", "issue12-shape-deeply-nested",
    safetensors('{"w":{"dtype":"F32","shape":' + nested() + ',"data_offsets":[0,4]}}', b"\0" * 4))
put("safetensors", "issue12-number-1e400",
    safetensors('{"w":{"dtype":"F32","shape":[1e400],"data_offsets":[0,4]}}', b"\0" * 4))

# --- shard index (the target's own shards are valid; seeds/harness-shards.json names them) ----
index = json.loads(seed("safetensors_index", "harness-shards.json"))
text = json.dumps(index)
put("safetensors_index", "issue12-metadata-deeply-nested",
    text.replace('"metadata": {', '"metadata": {"nested": ' + nested() + ', ', 1))
put("safetensors_index", "issue12-number-1e400", text.replace('"metadata": {', '"metadata": {"total": 1e400, ', 1))

# --- target config.json ----------------------------------------------------------------------
config = json.loads(seed("model_config", "micro.json"))
def config_with(**fields):
    c = dict(config)
    c.update(fields)
    return json.dumps(c, indent=1)
put("model_config", "issue12-number-1e400", config_with(rope_theta="__BIG__").replace('"__BIG__"', "1e400"))
# 2^62 heads: heads x head dims overflowed int64 in the tensor list (UBSan, compiler/frontend/tensor_spec.cc).
put("model_config", "issue12-heads-2pow62", config_with(num_attention_heads=1 << 62, num_key_value_heads=1 << 62))
# 10^8 routed experts: the tensor list of 10^9 names ended in std::bad_alloc ("internal error").
put("model_config", "issue12-experts-1e8", config_with(n_routed_experts=100_000_000))

# --- drafter config.json ---------------------------------------------------------------------
draft = json.loads(seed("draft_config", "micro-draft.json"))
draft["rope_theta"] = "__BIG__"
put("draft_config", "issue12-number-1e400", json.dumps(draft, indent=1).replace('"__BIG__"', "1e400"))

# --- IR text ---------------------------------------------------------------------------------
put("ir_parser", "issue12-list-attribute-deeply-nested",
    "module {\n  func @target(%x: f32[4, 8]) {\n"
    "    %0 = transpose(%x) {perm = " + nested() + "} : f32[8, 4]\n    output(%0) {name = \"y\"}\n  }\n}\n")
# element counts past 2^63 in a reshape (signed overflow in ir/type.cc), accepted with rc 0.
put("ir_parser", "issue12-reshape-element-count-overflows",
    "module {\n  func @target(%x: f32[4294967296, 4294967296]) {\n"
    "    %0 = reshape(%x) : f32[4294967296, 2147483648, 2]\n    output(%0) {name = \"y\"}\n  }\n}\n")
# a slice whose start + size overflows int64 (signed overflow in ir/infer.cc), accepted with rc 0.
put("ir_parser", "issue12-slice-bounds-overflow",
    "module {\n  func @target(%x: f32[4, 8]) {\n"
    "    %0 = slice(%x) {axis = 1, start = 9223372036854775807, size = 2} : f32[4, 2]\n"
    "    output(%0) {name = \"y\"}\n  }\n}\n")

# --- tokenizer -------------------------------------------------------------------------------
# a 5,000-letter word: "regex match failed: JIT stack limit reached" (valid UTF-8 refused).
put("tokenizer_codec", "issue12-5000-letter-word", b"\x00" + b"a" * 5000)
put("tokenizer_codec", "issue12-40000-letter-word-specials", b"\x02" + "é".encode() * 20000)

print("make_crash_inputs: wrote", sum(len(fs) for d, _, fs in os.walk(CORPUS) if d.endswith("crashes")), "inputs")
