#!/usr/bin/env python3
"""Stage 1 of the mini-v3 pipeline (CPU, any machine): corpus, tokenizer, token streams, prompts.

  /usr/bin/python3 tools/train/prepare_data.py --stdlib /usr/lib/python3.11 --out DATA [--ranks 4096] [--seed 1]

Writes into DATA:
  corpus/{train,heldout}.jsonl, corpus/manifest.json   the split corpus (corpus.py)
  tokenizer/tiktoken.model, tokenizer/tokenizer_config.json
  train.u16, heldout.u16      every document's ids followed by [EOS], as little-endian uint16
  heldout_prompts.jsonl       prompts drawn from held-out files: {"path", "text"} (--prompts of them)
  tokenizer_sample.jsonl      held-out snippets and their ids, the golden for kplan's C++ tokenizer
  data_manifest.json          sizes and hashes of all of the above
Deterministic: the same stdlib and seed give byte-identical files.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
import corpus  # noqa: E402


def log(msg):
    print(f"[prepare {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def write_stream(encoder, docs, path):
    import array
    eos = encoder.specials["[EOS]"]
    ids = array.array("H")
    for doc in docs:
        ids.extend(encoder.encode_ordinary(doc["text"]))
        ids.append(eos)
    if sys.byteorder != "little":
        ids.byteswap()
    with open(path, "wb") as f:
        ids.tofile(f)
    return len(ids)


def draw_prompts(docs, count, rng, min_chars=160, max_chars=400):
    """Prompts that start at a line start of a held-out file and run whole lines up to ~max_chars;
    a document gives at most one prompt until every document has given one."""
    prompts = []
    order = list(range(len(docs)))
    rng.shuffle(order)
    rounds = 0
    while len(prompts) < count and rounds < 8:
        for d in order:
            if len(prompts) >= count:
                break
            lines = docs[d]["text"].splitlines(keepends=True)
            if len(lines) < 8:
                continue
            start = rng.randrange(0, max(1, len(lines) - 8))
            text = ""
            for line in lines[start:]:
                if len(text) + len(line) > max_chars and len(text) >= min_chars:
                    break
                text += line
            if len(text) >= min_chars and text.strip():
                prompts.append({"path": docs[d]["path"], "line": start + 1, "text": text})
        rounds += 1
    return prompts


def tokenizer_sample(encoder, docs, rng, count=48):
    """Held-out snippets (whole-line and mid-line cuts, some with non-ASCII text) and their ids."""
    out = []
    extra = ["naïve café — 中文字符 and emoji 🎉\n", "\t\tx = 1  \r\n  y=2\n\n\n", "   ", "a'LL it's"]
    for text in extra:
        out.append({"text": text, "ids": encoder.encode_ordinary(text)})
    while len(out) < count:
        doc = docs[rng.randrange(len(docs))]["text"]
        start = rng.randrange(0, max(1, len(doc) - 64))
        text = doc[start:start + rng.randrange(16, 600)]
        out.append({"text": text, "ids": encoder.encode_ordinary(text)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stdlib", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ranks", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=64)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)

    manifest = corpus.write_corpus(args.stdlib, os.path.join(args.out, "corpus"))
    log(f"corpus: {manifest['files']} files, {manifest['bytes']} bytes, sha256 {manifest['sha256'][:16]}")
    train_docs = corpus.load_split(os.path.join(args.out, "corpus"), "train")
    heldout_docs = corpus.load_split(os.path.join(args.out, "corpus"), "heldout")

    counts = bpe.count_pieces(d["text"] for d in train_docs)
    log(f"pieces: {sum(counts.values())} ({len(counts)} unique)")
    vocab = bpe.train(counts, args.ranks, log=log)
    tok_dir = os.path.join(args.out, "tokenizer")
    os.makedirs(tok_dir, exist_ok=True)
    bpe.write_tiktoken_model(vocab, os.path.join(tok_dir, "tiktoken.model"))
    bpe.write_tokenizer_config(len(vocab), os.path.join(tok_dir, "tokenizer_config.json"))
    encoder = bpe.Encoder(vocab)
    log(f"tokenizer: {len(vocab)} ranks + {bpe.NUM_SPECIALS} specials")

    n_train = write_stream(encoder, train_docs, os.path.join(args.out, "train.u16"))
    n_held = write_stream(encoder, heldout_docs, os.path.join(args.out, "heldout.u16"))
    log(f"tokens: train {n_train}, heldout {n_held}")

    prompts = draw_prompts(heldout_docs, args.prompts, rng)
    with open(os.path.join(args.out, "heldout_prompts.jsonl"), "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    sample = tokenizer_sample(encoder, heldout_docs, rng)
    with open(os.path.join(args.out, "tokenizer_sample.jsonl"), "w", encoding="utf-8") as f:
        for s in sample:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")

    files = ["tokenizer/tiktoken.model", "tokenizer/tokenizer_config.json", "train.u16",
             "heldout.u16", "heldout_prompts.jsonl", "tokenizer_sample.jsonl"]
    data_manifest = {
        "seed": args.seed, "ranks": len(vocab), "vocab_size": encoder.vocab_size,
        "corpus": manifest, "tokens": {"train": n_train, "heldout": n_held},
        "prompts": len(prompts),
        "sha256": {name: sha256_file(os.path.join(args.out, name)) for name in files},
    }
    with open(os.path.join(args.out, "data_manifest.json"), "w") as f:
        json.dump(data_manifest, f, indent=2)
        f.write("\n")
    log("done")


if __name__ == "__main__":
    main()
