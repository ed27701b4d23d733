"""Byte-level BPE in tiktoken's format, as Kimi K2.x ships its tokenizer.

Training learns merges over the pieces of Kimi's pre-tokenizer regex (the pat_str of
tokenization_kimi.py, `&&` class intersections included); ranks 0..255 are the single bytes (rank
= byte value), rank 256 + k is the k-th merge. The encoder is tiktoken's algorithm, not the merge
list's: inside a piece, repeatedly join the adjacent pair whose concatenated bytes have the lowest
rank. That is what tiktoken (on the GPU machine) and kplan's C++ tokenizer do with the same
tiktoken.model, so the three agree by construction and tests check that they do.

Pure Python + the `regex` module (Debian: python3-regex; the GPU machine has it).
"""
import base64
import collections
import heapq
import json

import regex

KIMI_PAT_STR = "|".join([
    r"""[\p{Han}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# The special tokens after the ranks, at Kimi's offsets from the first special id (Kimi: 163584
# [BOS], 163585 [EOS], 163586 <|im_end|>, ...; its DFlash drafters use the reserved id 163838 =
# first + 254 as the mask token). Ids not named here are <|reserved_token_ID|>.
SPECIALS = [
    (0, "[BOS]"),
    (1, "[EOS]"),
    (2, "<|im_end|>"),
    (3, "<|im_user|>"),
    (4, "<|im_assistant|>"),
    (6, "<|start_header_id|>"),
    (7, "<|end_header_id|>"),
    (9, "[EOT]"),
    (10, "<|im_system|>"),
    (15, "<|im_middle|>"),
    (254, "<|dflash_mask|>"),
]
NUM_SPECIALS = 256


def compile_pattern():
    return regex.compile(KIMI_PAT_STR, regex.V1)


def count_pieces(texts, pattern=None):
    """Counter of pre-tokenizer pieces (as UTF-8 bytes) over an iterable of texts."""
    pattern = pattern or compile_pattern()
    counts = collections.Counter()
    for text in texts:
        counts.update(pattern.findall(text))
    return collections.Counter({piece.encode("utf-8"): n for piece, n in counts.items()})


def train(piece_counts, num_ranks, log=None):
    """Learns num_ranks - 256 merges; returns the rank table: list of token bytes, index = rank.

    Incremental: pair counts and the words holding each pair are kept up to date as merges apply,
    and a lazy max-heap picks the next pair (ties: the lexicographically smallest bytes pair, so
    training is deterministic)."""
    if num_ranks < 256:
        raise ValueError("num_ranks must be at least 256")
    vocab = [bytes([b]) for b in range(256)]
    index_of = {tok: i for i, tok in enumerate(vocab)}
    words = [list(piece) for piece in piece_counts]  # token ids per unique piece
    freqs = list(piece_counts.values())
    pair_count = collections.Counter()
    pair_words = collections.defaultdict(set)
    for w, (ids, f) in enumerate(zip(words, freqs)):
        for a, b in zip(ids, ids[1:]):
            pair_count[(a, b)] += f
            pair_words[(a, b)].add(w)

    def key(pair):
        return (-pair_count[pair], vocab[pair[0]], vocab[pair[1]])

    heap = [key(p) + (p,) for p in pair_count]
    heapq.heapify(heap)
    while len(vocab) < num_ranks and heap:
        neg, _, _, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg or -neg <= 0:
            continue  # stale entry
        merged = vocab[pair[0]] + vocab[pair[1]]
        if merged in index_of:
            new_id = index_of[merged]
        else:
            new_id = len(vocab)
            vocab.append(merged)
            index_of[merged] = new_id
        touched = set()
        for w in list(pair_words[pair]):
            ids, f = words[w], freqs[w]
            out, i = [], 0
            changed = False
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                    out.append(new_id)
                    i += 2
                    changed = True
                else:
                    out.append(ids[i])
                    i += 1
            if not changed:
                continue
            for a, b in zip(ids, ids[1:]):
                pair_count[(a, b)] -= f
                pair_words[(a, b)].discard(w)
                touched.add((a, b))
            for a, b in zip(out, out[1:]):
                pair_count[(a, b)] += f
                pair_words[(a, b)].add(w)
                touched.add((a, b))
            words[w] = out
        for p in touched:
            if pair_count[p] > 0:
                heapq.heappush(heap, key(p) + (p,))
            else:
                pair_count.pop(p, None)
                pair_words.pop(p, None)
        if log and len(vocab) % 512 == 0:
            log(f"bpe: {len(vocab)} ranks")
    return vocab


class Encoder:
    """tiktoken's encoding over a rank table, with Kimi's pre-tokenizer and special tokens."""

    def __init__(self, vocab):
        self.vocab = list(vocab)
        self.ranks = {tok: i for i, tok in enumerate(self.vocab)}
        if len(self.ranks) != len(self.vocab):
            raise ValueError("duplicate token bytes in the rank table")
        self.pattern = compile_pattern()
        self.special_base = len(self.vocab)
        self.specials = {name: self.special_base + off for off, name in SPECIALS}
        self.special_names = {i: n for n, i in self.specials.items()}
        self._cache = {}

    @property
    def vocab_size(self):
        return self.special_base + NUM_SPECIALS

    def _encode_piece(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        if piece in self.ranks:
            ids = [self.ranks[piece]]
        else:
            parts = [piece[i:i + 1] for i in range(len(piece))]
            while len(parts) > 1:
                best, best_rank = -1, None
                for i in range(len(parts) - 1):
                    r = self.ranks.get(parts[i] + parts[i + 1])
                    if r is not None and (best_rank is None or r < best_rank):
                        best, best_rank = i, r
                if best < 0:
                    break
                parts[best:best + 2] = [parts[best] + parts[best + 1]]
            ids = [self.ranks[p] for p in parts]
        if len(self._cache) < 1_000_000:
            self._cache[piece] = ids
        return ids

    def encode_ordinary(self, text):
        out = []
        for piece in self.pattern.findall(text):
            out.extend(self._encode_piece(piece.encode("utf-8")))
        return out

    def decode_bytes(self, ids):
        parts = []
        for i in ids:
            if 0 <= i < self.special_base:
                parts.append(self.vocab[i])
            elif i in self.special_names:
                parts.append(self.special_names[i].encode("utf-8"))
            elif self.special_base <= i < self.vocab_size:
                parts.append(f"<|reserved_token_{i}|>".encode("utf-8"))
            else:
                raise ValueError(f"token id {i} out of range")
        return b"".join(parts)


def write_tiktoken_model(vocab, path):
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for rank, tok in enumerate(vocab):
            f.write(f"{base64.b64encode(tok).decode('ascii')} {rank}\n")


def read_tiktoken_model(path):
    vocab = []
    with open(path, encoding="ascii") as f:
        for line_no, line in enumerate(f, 1):
            b64, rank = line.split()
            if int(rank) != line_no - 1:
                raise ValueError(f"{path}:{line_no}: rank {rank} out of order")
            vocab.append(base64.b64decode(b64))
    return vocab


def tokenizer_config(num_ranks):
    """tokenizer_config.json as Kimi's checkpoints write it (TikTokenTokenizer, special tokens in
    added_tokens_decoder, bos/eos named)."""
    added = {str(num_ranks + off): {"content": name, "lstrip": False, "normalized": False,
                                    "rstrip": False, "single_word": False, "special": True}
             for off, name in SPECIALS}
    return {
        "added_tokens_decoder": added,
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>",
                                      "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
                                      "<|im_system|>", "<|im_middle|>"],
        "bos_token": "[BOS]",
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "model_max_length": 1048576,
        "pad_token": "<|im_end|>",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": None,
    }


def write_tokenizer_config(num_ranks, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(num_ranks), f, indent=2, ensure_ascii=False)
        f.write("\n")
