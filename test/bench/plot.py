#!/usr/bin/env python3
"""test/bench/plot.py: charts of test/bench/out/results.csv.

Usage: plot.py RESULTS_CSV PNG [SCALE_PNG]

PNG: two panels of horizontal grouped bars, one bar pmhash/hash and one
pmhash/btree per metric: times and sizes (lower is better) and pgbench tps
(higher is better), on a logarithmic axis with a line at 1.  The issue's
floor on each ratio is marked with a black tick; a failed floor's label is
red.

SCALE_PNG (written when the results hold two or more int8 data sets, such
as i1m, i10m and i100m): the scale curve, one panel per SQL-level metric
(build time, size, probes, insert) and the AM-level probe, each AM's value against the number of
rows, both axes logarithmic.
"""
import csv
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

TICKS = [0.01, 0.02, 0.05, 0.1, 0.15, 0.25, 0.5, 0.8, 1, 1.15, 1.3, 1.5, 2, 3, 5, 10, 20]
COLORS = {"hash": "#4c72b0", "btree": "#dd8452"}
AM_COLORS = {"pmhash": "#55a868", "hash": COLORS["hash"], "btree": COLORS["btree"]}
SCALE_METRICS = ["build_s", "size_mb", "probe_present_us", "probe_absent_us", "insert_us", "am_present_ns"]


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


def int8_rows(dataset):
    """Row count of an int8 data set name (i1m: 1000000), or None for others."""
    m = re.fullmatch(r"i(\d+)([km]?)", dataset)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "k": 1000, "m": 1000000}[m.group(2)]


def scale_figure(rows, png):
    """Plot the scale curve of the int8 data sets, if there are two or more."""
    sql = [r for r in rows if r["section"] in ("sql", "am") and int8_rows(r["dataset"])]
    sizes = sorted({int8_rows(r["dataset"]) for r in sql})
    if len(sizes) < 2:
        return
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5))
    for ax, key in zip(axes.flat, SCALE_METRICS):
        picked = sorted((r for r in sql if r["key"] == key), key=lambda r: int8_rows(r["dataset"]))
        if not picked:
            ax.set_visible(False)
            continue
        for am in ("pmhash", "hash", "btree"):
            points = [(int8_rows(r["dataset"]), float(r[am])) for r in picked if r[am]]
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                    color=AM_COLORS[am], label=am)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels(["%gM" % (n / 1e6) for n in sizes], fontsize=8)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))
        ax.yaxis.set_minor_locator(NullLocator())
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("rows", fontsize=8)
        ax.set_title("%s (%s)" % (picked[0]["metric"], picked[0]["unit"]), fontsize=9)
        ax.grid(which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(SCALE_METRICS):]:
        ax.set_visible(False)
    fig.suptitle("Scale curve, int8 keys: pmhash, hash and btree against the table's rows", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(png, dpi=120)
    print("wrote %s" % png)


def main():
    src, png = sys.argv[1], sys.argv[2]
    rows = read_rows(src)
    if len(sys.argv) > 3:
        scale_figure(rows, sys.argv[3])
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
