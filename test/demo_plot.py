#!/usr/bin/env python3
"""test/demo_plot.py: the picture of the pmhash demo.

Usage: demo_plot.py RESULTS_CSV PNG ROWS

RESULTS_CSV is the demo's results.csv (columns index, build_ms, size_bytes,
probe_us, insert_us; one row each for pmhash, hash and btree).  Writes PNG:
four panels, one per measure (build time, size, probe time per key, insert
time per row), a labelled bar per index in each, lower is better; ROWS, the
demo table's row count, goes in the title.
"""
import csv
import sys
from decimal import ROUND_HALF_UP, Decimal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

INDEXES = ["pmhash", "hash", "btree"]
COLORS = {"pmhash": "#55a868", "hash": "#4c72b0", "btree": "#dd8452"}
# (CSV column, panel title, divisor from the CSV's unit to the panel's, label step),
# labels rounded as the demo's table rounds them
MEASURES = [
    ("build_ms", "build time (ms)", 1, Decimal("1")),
    ("size_bytes", "size (MB)", 1048576, Decimal("0.1")),
    ("probe_us", "probe time per key (µs)", 1, Decimal("0.01")),
    ("insert_us", "insert time per row (µs)", 1, Decimal("0.01")),
]


def read_results(path):
    """{index: {column: value}} of results.csv."""
    with open(path, newline="") as f:
        return {r["index"]: {k: Decimal(v) for k, v in r.items() if k != "index"} for r in csv.DictReader(f)}


def panel(ax, results, column, title, divisor, step):
    """Draw one measure's bars, each labelled with its value."""
    values = [results[i][column] / divisor for i in INDEXES]
    bars = ax.bar(INDEXES, [float(v) for v in values], color=[COLORS[i] for i in INDEXES])
    ax.bar_label(bars, labels=[str(v.quantize(step, ROUND_HALF_UP)) for v in values], padding=2, fontsize=9)
    ax.set_title(title, fontsize=11)
    ax.set_ylim(0, float(max(values)) * 1.18)
    ax.tick_params(axis="y", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)


def main():
    """Read the CSV and write the PNG."""
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    csv_path, png_path, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    results = read_results(csv_path)
    fig, axes = plt.subplots(2, 2, figsize=(10, 6))
    for ax, (column, title, divisor, step) in zip(axes.flat, MEASURES):
        panel(ax, results, column, title, divisor, step)
    fig.suptitle("pmhash demo: %s rows, pmhash vs hash vs btree (lower is better)" % format(rows, ","),
                 fontsize=13)
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)


if __name__ == "__main__":
    main()
