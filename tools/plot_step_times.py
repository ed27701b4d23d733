#!/usr/bin/env python3
"""Step time against tokens per step (N), kplan against its peer and the byte floor.

Reads `kplan bench --all-buckets --json` files (slice_kplan_<name>.json) and the peer's
(slice_peer_<mode>.json, ../shared/peers/hf_deepseek_v3_slice.py --json), prints one table
(ms per step, % of each one's byte floor, kplan's speed-up over the compiled peer) and, where
matplotlib is installed, writes the plot. kplan's floor is its own bytes read (its weight formats,
the routed experts its steps touched) over --hbm-gbps; the peer's is the one it prints (bf16,
independent routing).
  tools/plot_step_times.py --out steps.png --hbm-gbps 4300 out/slice_*.json
"""
import argparse, json, os, re, sys


def load(paths, hbm_gbps):
    series = {}  # name -> {tokens: (ms, floor_ms)}
    for path in paths:
        base = os.path.basename(path)
        j = json.load(open(path))
        if "buckets" in j:  # kplan bench --all-buckets
            name = "kplan " + re.sub(r"^slice_kplan_|\.json$", "", base).replace("_", " ") + " experts"
            rows = {b["tokens"]: (b["step_ms_median"], b["read_bytes"] / (hbm_gbps * 1e9) * 1e3) for b in j["buckets"]}
        elif "rows" in j:  # the peer
            name = j.get("peer", base)
            rows = {r["tokens"]: (r["ms"], r["floor_ms"]) for r in j["rows"]}
        else:
            sys.exit(f"{path}: neither kplan bench --all-buckets JSON nor the peer's")
        series[name] = rows
    return series


def table(series):
    tokens = sorted({t for rows in series.values() for t in rows})
    names = list(series)
    compiled = next((n for n in names if n.endswith("compiled")), None)
    head = f"{'N':>4} " + " ".join(f"{n[:26]:>26}" for n in names)
    lines = ["step ms (% of its byte floor)" + (f"; kplan / {compiled}: its speed-up" if compiled else ""), head]
    for t in tokens:
        cells = []
        for n in names:
            if t not in series[n]:
                cells.append(f"{'-':>26}")
                continue
            ms, floor = series[n][t]
            cell = f"{ms:8.3f} ({100 * floor / ms:3.0f}%)"
            if compiled and n.startswith("kplan") and t in series[compiled]:
                cell += f" {series[compiled][t][0] / ms:5.2f}x"
            cells.append(f"{cell:>26}")
        lines.append(f"{t:>4} " + " ".join(cells))
    return "\n".join(lines)


def plot(series, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {out} not written)")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for n, rows in series.items():
        ts = sorted(rows)
        line, = ax.plot(ts, [rows[t][0] for t in ts], marker="o", label=n)
        ax.plot(ts, [rows[t][1] for t in ts], linestyle=":", color=line.get_color(), label=f"{n}: byte floor")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per step (N)")
    ax.set_ylabel("step time (ms)")
    ax.set_title("Kimi K2.6 width, 3-layer slice, one H200")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+")
    ap.add_argument("--out", default="steps.png")
    ap.add_argument("--hbm-gbps", type=float, default=4300.0, help="floor bandwidth, GB/s (1e9 bytes)")
    a = ap.parse_args()
    series = load([p for p in a.json if os.path.exists(p)], a.hbm_gbps)
    if not series:
        sys.exit("no JSON to plot")
    print(table(series))
    plot(series, a.out)


if __name__ == "__main__":
    main()
