#!/usr/bin/python3
"""Plot and tabulate a `kplan bench --acceptance ... --json FILE` measurement (format
kplan-acceptance-1, documented at the top of tools/kplan/cmd_bench_acceptance.cc).

    tools/plot_acceptance.py acceptance.json [-o acceptance.png] [--title TEXT] [--no-plot]

Writes a PNG (default: the JSON's path with .png): mean acceptance length against the DDTree
budget, one line per temperature, chain DFlash at the same temperature drawn as a dashed
horizontal reference. Prints a Markdown table of every row to stdout (for docs/acceptance.md).

A documentation tool, not part of the test suite: it needs matplotlib only for the PNG, from
Debian's python3-matplotlib (hence /usr/bin/python3), and --no-plot prints the table without it.
"""
import argparse
import json
import sys
from pathlib import Path

FORMAT = "kplan-acceptance-1"


def fail(message):
    print(f"plot_acceptance.py: error: {message}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        data = json.loads(Path(path).read_text())
    except OSError as e:
        fail(f"cannot read '{path}': {e.strerror}")
    except json.JSONDecodeError as e:
        fail(f"'{path}' is not JSON ({e})")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        fail(f"'{path}' is not a {FORMAT} file (write one with kplan bench --acceptance PROMPTS MODEL --json FILE)")
    return data


def markdown_table(data):
    lines = [
        "| temperature | mode | budget | mean acceptance length | per-prompt mean | target forwards | "
        "tokens/s | vs AR |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in data["rows"]:
        budget = "" if row["budget"] is None else str(row["budget"])
        lines.append(
            f"| {row['temperature']:g} | {row['label']} | {budget} | {row['mean_acceptance_length']:.3f} | "
            f"{row['mean_acceptance_length_per_prompt']:.3f} | {row['target_forwards']} | "
            f"{row['tokens_per_second']:.1f} | {row['speedup_vs_ar']:.2f}x |")
    return "\n".join(lines)


def caption(data):
    return (f"{len(data['prompts'])} prompts, max-new {data['max_new']}, drafter {data['drafter']} "
            f"(block {data['draft_block_size']}), {data['device_description']}")


def plot(data, out, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is missing: apt-get install python3-matplotlib (for /usr/bin/python3), or give --no-plot")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, temperature in enumerate(data["temperatures"]):
        rows = [r for r in data["rows"] if r["temperature"] == temperature]
        tree = sorted((r["budget"], r["mean_acceptance_length"]) for r in rows if r["mode"] == "ddtree")
        color = f"C{i}"
        label = "greedy" if temperature == 0 else f"temperature {temperature:g}"
        if tree:
            ax.plot([b for b, _ in tree], [a for _, a in tree], marker="o", color=color, label=f"DDTree, {label}")
        for r in rows:
            if r["mode"] == "dflash":
                ax.axhline(r["mean_acceptance_length"], color=color, linestyle="--",
                           label=f"chain DFlash, {label}")
    ax.set_xscale("log", base=2)
    budgets = sorted(data["budgets"])
    ax.set_xticks(budgets)
    ax.set_xticklabels([str(b) for b in budgets])
    ax.set_xlabel("DDTree budget (tree nodes per round)")
    ax.set_ylabel("mean acceptance length (tokens per round)")
    ax.set_title(title or "Acceptance length against budget")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.text(0.5, 0.01, caption(data), ha="center", fontsize="x-small")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser(description="Plot and tabulate a kplan bench --acceptance JSON file")
    parser.add_argument("json_file")
    parser.add_argument("-o", "--output", help="PNG to write (default: the JSON file's path with .png)")
    parser.add_argument("--title", help="the plot's title")
    parser.add_argument("--no-plot", action="store_true", help="print the Markdown table only")
    args = parser.parse_args()
    data = load(args.json_file)
    print(markdown_table(data))
    print()
    print(caption(data))
    if not args.no_plot:
        out = args.output or str(Path(args.json_file).with_suffix(".png"))
        plot(data, out, args.title)
        print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
