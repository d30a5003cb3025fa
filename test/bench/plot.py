#!/usr/bin/env python3
"""test/bench/plot.py: bar charts of the ratios in test/bench/out/results.csv.

Usage: plot.py RESULTS_CSV PNG

Two panels of horizontal grouped bars, one bar pmhash/hash and one
pmhash/btree per metric: times and sizes (lower is better) and pgbench tps
(higher is better), on a logarithmic axis with a line at 1.  The issue's
floor on each ratio is marked with a black tick; a failed floor's label is
red.
"""
import csv
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

TICKS = [0.01, 0.02, 0.05, 0.1, 0.15, 0.25, 0.5, 0.8, 1, 1.15, 1.3, 1.5, 2, 3, 5, 10, 20]
COLORS = {"hash": "#4c72b0", "btree": "#dd8452"}


def read_rows(path):
    """Rows of results.csv that have at least one ratio."""
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["pmhash_hash"] or r["pmhash_btree"]]


def floors(text):
    """{reference: bound} of a floor text such as "/hash <= 0.5; /btree < 1"."""
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"/(\w+) [<>]=? ([0-9.]+)", text)}


def panel(ax, rows, title):
    """Draw one panel of grouped horizontal bars."""
    labels = [("%s %s" % (r["dataset"], r["metric"]) if r["section"] == "pgbench" else
               "%s %s %s" % (r["section"], r["dataset"], r["metric"])) for r in rows]
    y = list(range(len(rows)))
    height = 0.38
    for i, ref in enumerate(("hash", "btree")):
        vals = [float(r["pmhash_" + ref]) if r["pmhash_" + ref] else 0 for r in rows]
        pos = [v - height / 2 + i * height for v in y]
        ax.barh(pos, vals, height=height, color=COLORS[ref], label="pmhash / " + ref)
        for p, v in zip(pos, vals):
            if v > 0:
                ax.text(v * 1.03, p, "%.2f" % v, va="center", fontsize=6)
        for p, r in zip(pos, rows):
            bound = floors(r["floor"]).get(ref)
            if bound is not None:
                ax.plot([bound, bound], [p - height / 2, p + height / 2], color="black", linewidth=2)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    for tick, r in zip(ax.get_yticklabels(), rows):
        if r["result"] == "FAIL":
            tick.set_color("red")
    ax.invert_yaxis()
    ax.set_xscale("log")
    vals = [float(r["pmhash_" + ref]) for r in rows for ref in ("hash", "btree") if r["pmhash_" + ref]]
    ticks = [t for t in TICKS if min(vals + [1.0]) / 1.5 <= t <= max(vals + [1.0]) * 1.5]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["%g" % t for t in ticks], fontsize=7)
    ax.minorticks_off()
    ax.axvline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="x", which="both", alpha=0.3)


def main():
    src, png = sys.argv[1], sys.argv[2]
    rows = read_rows(src)
    lower = [r for r in rows if r["better"] == "lower"]
    higher = [r for r in rows if r["better"] == "higher"]
    panels = [(lower, "times and sizes: ratio < 1 means pmhash is better"),
              (higher, "pgbench tps: ratio > 1 means pmhash is better")]
    panels = [p for p in panels if p[0]]
    sizes = [max(len(p[0]), 2) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 1.5 + 0.32 * sum(sizes)),
                             gridspec_kw={"height_ratios": sizes}, squeeze=False)
    for ax, (prows, title) in zip(axes[:, 0], panels):
        panel(ax, prows, title)
    npass = sum(1 for r in rows if r["result"] == "PASS")
    nfail = sum(1 for r in rows if r["result"] == "FAIL")
    fig.suptitle("pmhash vs PostgreSQL hash and btree (black ticks: floors; %d PASS, %d FAIL)"
                 % (npass, nfail), fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    fig.savefig(png, dpi=120)
    print("wrote %s" % png)


if __name__ == "__main__":
    main()
