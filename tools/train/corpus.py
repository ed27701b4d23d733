"""The training corpus: the Python standard library's source (Debian 12's python3.11 with its test
suite, packages libpython3.11-stdlib + libpython3.11-testsuite), split BY FILE into train and
held-out, so no held-out prompt has its file in training.

A file is held out when sha256(its path relative to the stdlib root) mod 20 == 0 (about 5%), so
the split depends on nothing but the file list. Files that are not UTF-8 or are larger than 256 KiB
(generated tables) are skipped. site-packages / dist-packages are not stdlib and are skipped.
"""
import hashlib
import json
import os

MAX_FILE_BYTES = 256 * 1024
HELDOUT_MODULUS = 20


def stdlib_files(root):
    """Relative paths of the .py files under root, sorted, with the skipped ones left out."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in ("site-packages", "dist-packages", "__pycache__"))
        for name in sorted(filenames):
            if name.endswith(".py"):
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def is_heldout(rel_path):
    digest = hashlib.sha256(rel_path.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % HELDOUT_MODULUS == 0


def read_documents(root):
    """[(rel_path, text, split)] for every usable file; split is "train" or "heldout"."""
    docs = []
    for rel in stdlib_files(root):
        path = os.path.join(root, rel)
        if os.path.islink(path) or os.path.getsize(path) > MAX_FILE_BYTES:
            continue
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not text.strip():
            continue
        docs.append((rel, text, "heldout" if is_heldout(rel) else "train"))
    return docs


def write_corpus(root, out_dir):
    """Writes out_dir/{train,heldout}.jsonl ({"path", "text"} per line) and manifest.json (file
    counts, bytes, and a sha256 over the paths and contents, so two machines can compare)."""
    os.makedirs(out_dir, exist_ok=True)
    docs = read_documents(root)
    h = hashlib.sha256()
    stats = {"train": [0, 0], "heldout": [0, 0]}
    files = {s: open(os.path.join(out_dir, f"{s}.jsonl"), "w", encoding="utf-8") for s in stats}
    for rel, text, split in docs:
        files[split].write(json.dumps({"path": rel, "text": text}, ensure_ascii=False) + "\n")
        stats[split][0] += 1
        stats[split][1] += len(text.encode("utf-8"))
        h.update(rel.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\0")
    for f in files.values():
        f.close()
    manifest = {
        "root": os.path.abspath(root),
        "files": {s: v[0] for s, v in stats.items()},
        "bytes": {s: v[1] for s, v in stats.items()},
        "sha256": h.hexdigest(),
        "heldout_rule": f"sha256(relative path) mod {HELDOUT_MODULUS} == 0",
    }
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def load_split(out_dir, split):
    with open(os.path.join(out_dir, f"{split}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]
