#!/usr/bin/env python3
"""test/bench/report.py: the results table of test/bench/run.sh.

Usage: report.py OUTDIR

Reads OUTDIR/raw.csv (every measurement: section, dataset, am, metric, rep,
value), OUTDIR/meta.txt (key=value lines about the run) and, if present,
OUTDIR/core.csv ("core,<metric>,<value>" lines of the core benchmark).  Keeps
the best repetition of each timing (least time, most tps), the median of
TPC-B-like tps, sizes and WAL volumes, computes the ratios pmhash/hash and
pmhash/btree,
checks them against the issue's floors, prints the table and writes
OUTDIR/results.md and OUTDIR/results.csv.
"""
import csv
import os
import statistics
import sys

AMS = ["pmhash", "hash", "btree"]

# key: (label, unit, aggregate, better, floors); a floor is (reference, op,
# bound): reference "hash" or "btree" bounds the ratio pmhash/reference,
# "abs" bounds pmhash's own value.  "abs1m" applies only at 1M entries; a
# fourth element is the least row count a floor applies at (the scale curve's).
SPECS = {
    "build_s": ("build time", "s", "min", "lower",
                [("hash", "<=", 0.5), ("btree", "<", 1.0), ("hash", "<=", 0.2, 100000000)]),
    "build_wal_mb": ("WAL written by the build", "MB", "median", "lower", []),
    "size_mb": ("index size", "MB", "median", "lower", [("hash", "<=", 0.5)]),
    "size_bpe": ("index size per entry", "B", "median", "lower", [("abs1m", "<=", 16.0)]),
    "probe_present_us": ("probe, present key (nested loop)", "us", "min", "lower",
                         [("hash", "<=", 0.8), ("btree", "<", 1.0), ("hash", "<=", 0.7, 100000000)]),
    "probe_absent_us": ("probe, absent key (nested loop)", "us", "min", "lower", [("hash", "<=", 0.5)]),
    "insert_us": ("insert, table + index", "us/row", "min", "lower", [("hash", "<=", 0.6)]),
    "insert_index_us": ("insert, index share (minus no-index insert)", "us/row", "derived", "lower", []),
    "insert_wal_b": ("insert WAL, table + index", "B/row", "median", "lower", []),
    "insert_index_wal_b": ("insert WAL, index share", "B/row", "derived", "lower", []),
    "grow_us": ("insert doubling the table, table + index", "us/row", "min", "lower",
                [("hash", "<=", 0.6), ("btree", "<=", 0.6)]),
    "grow_index_us": ("insert doubling the table, index share", "us/row", "derived", "lower", []),
    "grow_wal_b": ("insert doubling the table, WAL, table + index", "B/row", "median", "lower", []),
    "grow_index_wal_b": ("insert doubling the table, WAL, index share", "B/row", "derived", "lower", []),
    "am_present_ns": ("AM-level probe, present key", "ns", "min", "lower", [("hash", "<=", 0.25)]),
    "am_absent_ns": ("AM-level probe, absent key", "ns", "min", "lower", [("hash", "<=", 0.25)]),
}
PGBENCH_ORDER = ["select", "select_exec", "select_median", "prepared", "prepared_exec",
                 "prepared_median", "tpcb", "tpcb_wal"]
SQL_ORDER = ["build_s", "build_wal_mb", "size_mb", "size_bpe", "probe_present_us", "probe_absent_us",
             "any_const_k1000_ms", "any_const_k1000_exec_ms", "any_const_k10000_ms",
             "any_const_k10000_exec_ms", "any_param_k1000_ms", "any_param_k1000_exec_ms",
             "any_param_k10000_ms", "any_param_k10000_exec_ms",
             "insert_us", "insert_index_us", "insert_wal_b", "insert_index_wal_b",
             "grow_us", "grow_index_us", "grow_wal_b", "grow_index_wal_b"]
# index shares: the metric minus the same one measured with no index
SHARE_OF = {"insert_index_us": "insert_us", "insert_index_wal_b": "insert_wal_b",
            "grow_index_us": "grow_us", "grow_index_wal_b": "grow_wal_b"}


def sql_spec(metric):
    """The spec of an SQL-level metric; any_<const|param>_k<K>[_exec]_ms for "k = ANY(array)" of K
    keys (_exec: the execution in the server alone)."""
    if metric.startswith("any_"):
        parts = metric.split("_")
        how, keys = parts[1], parts[2][1:]
        if parts[3] == "exec":
            what = "constant" if how == "const" else "generic plan"
            return ("k = ANY, %s keys, %s: execution in the server" % (keys, what), "ms", "min",
                    "lower", [])
        if how == "const":
            return ("k = ANY(array of %s keys), constant" % keys, "ms", "min", "lower",
                    [("btree", "<=", 0.6), ("hash", "<=", 0.5)])
        return ("k = ANY($1) of %s keys, generic plan" % keys, "ms", "min", "lower",
                [("btree", "<=", 1.0)])
    return SPECS[metric]


def pgbench_spec(metric):
    """The spec of a pgbench metric <select|prepared>[_exec|_median]_c<clients>,
    tpcb[_wal]_c<clients>.  The floors of select-only are on the median execution: the mean is
    reported, but a few executions in a thousand stalled by the machine move it by microseconds
    (test/bench/README, Select-only in the server)."""
    mode, clients = metric.split("_c")
    plural = "" if clients == "1" else "s"
    if mode == "tpcb_wal":
        return ("WAL per TPC-B-like transaction, %s client%s" % (clients, plural), "B", "median",
                "lower", [])
    if mode in ("select_exec", "prepared_exec"):
        how = ", prepared" if mode == "prepared_exec" else ""
        return ("select-only statement in the server%s, mean, %s client%s" % (how, clients, plural),
                "us", "min", "lower", [])
    if mode in ("select_median", "prepared_median"):
        how = ", prepared" if mode == "prepared_median" else ""
        return ("select-only statement in the server%s, median, %s client%s" % (how, clients, plural),
                "us", "min", "lower", [("hash", "<=", 0.8), ("btree", "<=", 0.8)])
    if mode in ("select", "prepared"):
        how = ", prepared" if mode == "prepared" else ""
        return ("pgbench select-only%s, %s client%s" % (how, clients, plural), "tps", "max", "higher",
                [])
    return ("pgbench TPC-B-like, %s client%s" % (clients, plural), "tps", "median", "higher",
            [("hash", ">=", 1.0)])


def read_raw(path):
    """Measurements as {(section, dataset, am, metric): [values]}, in file order."""
    data = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["section"], row["dataset"], row["am"], row["metric"])
            data.setdefault(key, []).append(float(row["value"]))
    return data


def read_meta(path):
    """The run's metadata as an ordered dict."""
    meta = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    meta[k] = v
    return meta


def aggregate(values, how):
    """The kept value of a list of repetitions."""
    if how == "min":
        return min(values)
    if how == "max":
        return max(values)
    return statistics.median(values)


def how_kept(section, metric):
    """How the repetitions of a metric are reduced to one value."""
    if section == "pgbench":
        return pgbench_spec(metric)[2]
    if metric.startswith("any_"):
        return sql_spec(metric)[2]
    if metric in SPECS and SPECS[metric][2] != "derived":
        return SPECS[metric][2]
    return "median"


def check(floors, values, ratios, rows):
    """(floor text, PASS/FAIL/'') of one row."""
    texts, ok = [], True
    ops = {"<=": lambda a, b: a <= b, "<": lambda a, b: a < b, ">=": lambda a, b: a >= b}
    for floor in floors:
        ref, op, bound = floor[:3]
        if len(floor) > 3 and (rows is None or rows < floor[3]):
            continue
        if ref == "abs1m":
            if rows != 1000000:
                continue
            texts.append("pmhash %s %g" % (op, bound))
            got = values.get("pmhash")
        else:
            texts.append("/%s %s %g" % (ref, op, bound))
            got = ratios.get(ref)
        if got is None or not ops[op](got, bound):
            ok = False
    if not texts:
        return "", ""
    return "; ".join(texts), ("PASS" if ok else "FAIL")


def fmt(x):
    """A number with 3-4 significant digits, or '' for None."""
    if x is None:
        return ""
    if isinstance(x, str):
        return x
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return "%.3g" % x
    if abs(x) >= 100:
        return "%.0f" % x
    return "%.3g" % x if abs(x) < 1 else "%.4g" % x


def build_rows(data):
    """The result rows, in report order."""
    kept = {k: aggregate(v, how_kept(k[0], k[3])) for k, v in data.items()}
    rows = []
    datasets = []
    for (section, ds, am, metric) in data:
        if (section, ds) not in datasets:
            datasets.append((section, ds))
    for section in ("sql", "am", "pgbench"):
        for sec, ds in datasets:
            if sec != section:
                continue
            entries = kept.get(("sql", ds, "-", "rows"))
            metrics = []
            for (s, d, am, m) in data:
                if s == section and d == ds and am in AMS and m not in metrics:
                    metrics.append(m)
            if section == "sql":
                metrics += [share for share, base in SHARE_OF.items() if base in metrics]
                metrics = [m for m in SQL_ORDER if m in metrics] + [m for m in metrics if m not in SQL_ORDER]
            if section == "pgbench":
                metrics.sort(key=lambda m: (PGBENCH_ORDER.index(m.split("_c")[0]), int(m.split("_c")[1])))
            for m in metrics:
                spec = pgbench_spec(m) if section == "pgbench" else sql_spec(m)
                label, unit, _, better, floors = spec
                values = {}
                for am in AMS:
                    if m in SHARE_OF:
                        base = SHARE_OF[m]
                        a, n = kept.get((section, ds, am, base)), kept.get((section, ds, "none", base))
                        values[am] = None if a is None or n is None else a - n
                    else:
                        values[am] = kept.get((section, ds, am, m))
                spread = None
                if how_kept(section, m) in ("min", "max"):
                    spreads = [max(v) / min(v) - 1 for v in (data.get((section, ds, am, m)) for am in AMS)
                               if v and len(v) > 1 and min(v) > 0]
                    spread = 100 * max(spreads) if spreads else None
                ratios = {}
                for ref in ("hash", "btree"):
                    if values["pmhash"] is not None and values[ref]:
                        ratios[ref] = values["pmhash"] / values[ref]
                floor, result = check(floors, values, ratios, entries)
                rows.append({"section": section, "dataset": ds, "key": m, "metric": label, "unit": unit,
                             "better": better, "pmhash": values["pmhash"], "hash": values["hash"],
                             "btree": values["btree"], "pmhash_hash": ratios.get("hash"),
                             "pmhash_btree": ratios.get("btree"), "spread": spread, "floor": floor,
                             "result": result})
    return rows, kept


def core_rows(path):
    """Rows of the core benchmark's "core,<metric>,<value>" lines."""
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if len(rec) < 3 or rec[0] != "core":
                continue
            value = ",".join(rec[2:])
            result = ""
            if rec[1].startswith("check_") and value in ("PASS", "FAIL"):
                value, result = None, value
            else:
                try:
                    value = float(value)
                except ValueError:
                    pass
            rows.append({"section": "core", "dataset": "", "key": rec[1], "metric": rec[1], "unit": "",
                         "better": "", "pmhash": value, "hash": None, "btree": None, "pmhash_hash": None,
                         "pmhash_btree": None, "spread": None, "floor": "", "result": result})
    return rows


def bound_rows(kept):
    """Rows comparing pgbench select-only with the index-free bound (pseudo-AM "tid")."""
    rows = []
    for (section, ds, am, m), bound in kept.items():
        if section != "pgbench" or am != "tid" or not bound or "_exec" in m or "_median" in m:
            continue
        v = {a: kept.get((section, ds, a, m)) for a in AMS}
        mode, clients = m.split("_c")
        calc = kept.get((section, ds, "tidcalc", m))
        rows.append({"dataset": ds, "protocol": "prepared" if mode == "prepared" else "simple",
                     "clients": clients, "bound": bound,
                     "bound_hash": bound / v["hash"] if v["hash"] else None,
                     "bound_btree": bound / v["btree"] if v["btree"] else None,
                     "calc": calc, "calc_hash": calc / v["hash"] if calc and v["hash"] else None,
                     "pmhash_bound": v["pmhash"] / bound if v["pmhash"] else None})
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    return sorted(rows, key=lambda r: (order.index(r["dataset"]), r["protocol"] != "simple",
                                       int(r["clients"])))


def control_rows(data, kept):
    """Rows comparing TPC-B-like tps of hash with its second copy (set "hash2"), cell by cell."""
    rows = []
    for (section, ds, am, m), control in kept.items():
        if section != "pgbench" or am != "hash2" or not m.startswith("tpcb_c"):
            continue
        hash_tps, pmhash_tps = kept.get((section, ds, "hash", m)), kept.get((section, ds, "pmhash", m))
        pairs = list(zip(data.get((section, ds, "hash2", m), []), data.get((section, ds, "hash", m), [])))
        per_rep = [a / b for a, b in pairs if b]
        rows.append({"dataset": ds, "clients": m.split("_c")[1], "hash": hash_tps, "control": control,
                     "control_hash": control / hash_tps if hash_tps else None,
                     "control_low": min(per_rep) if per_rep else None,
                     "control_high": max(per_rep) if per_rep else None,
                     "pmhash_hash": pmhash_tps / hash_tps if pmhash_tps and hash_tps else None})
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    return sorted(rows, key=lambda r: (order.index(r["dataset"]), int(r["clients"])))


def share_rows(kept):
    """Rows of the select-only statement's server time minus the index-free bound's: the index's
    share; and the cheapest index's (tidcalc), the part of it any index scan costs."""
    rows = []
    for (section, ds, am, m), bound in kept.items():
        if section != "pgbench" or am != "tid" or bound is None or ("_exec" not in m and
                                                                      "_median" not in m):
            continue
        v = {a: kept.get((section, ds, a, m)) for a in AMS + ["tidcalc"]}
        share = {a: v[a] - bound if v[a] is not None else None for a in AMS + ["tidcalc"]}
        mode, clients = m.split("_c")
        rows.append({"dataset": ds, "protocol": "prepared" if mode.startswith("prepared") else "simple",
                     "clients": clients, "statistic": "median" if "_median" in m else "mean",
                     "bound": bound, "tidcalc": share["tidcalc"],
                     "calc_hash": v["tidcalc"] / v["hash"] if v["tidcalc"] and v["hash"] else None,
                     "pmhash": share["pmhash"],
                     "hash": share["hash"], "btree": share["btree"],
                     "pmhash_hash": share["pmhash"] / share["hash"] if share["pmhash"] is not None
                     and share["hash"] else None,
                     "pmhash_btree": share["pmhash"] / share["btree"] if share["pmhash"] is not None
                     and share["btree"] else None})
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    return sorted(rows, key=lambda r: (order.index(r["dataset"]), r["protocol"] != "simple",
                                       int(r["clients"])))


def outside_executor(kept, ds, metric):
    """The least time of "k = ANY" outside the executor over the AMs (total minus execution in the
    server: parsing, planning and the transfer of the query, which no index can save), or None."""
    times = [kept.get(("sql", ds, am, metric)) for am in AMS]
    execs = [kept.get(("sql", ds, am, metric[:-3] + "_exec_ms")) for am in AMS]
    outside = [t - e for t, e in zip(times, execs) if t is not None and e is not None]
    return min(outside) if outside else None


def any_bound(kept, ds, metric):
    """The least time any index's "k = ANY(constant)" could take: the time outside the executor
    (outside_executor) plus the execution of the same rows' fetch by TID with no index (set
    "tid"), or None."""
    outside = outside_executor(kept, ds, metric)
    fetch = kept.get(("sql", ds, "tid", metric[:-3] + "_exec_ms"))
    return None if outside is None or fetch is None else outside + fetch


def any_bound_rows(kept):
    """Rows of "k = ANY(constant)" against its index-free bound, per data set and array size."""
    rows = []
    for (section, ds, am, m), fetch in kept.items():
        if section != "sql" or am != "tid" or not m.endswith("_exec_ms"):
            continue
        total = m[:-len("_exec_ms")] + "_ms"
        v = {a: kept.get((section, ds, a, total)) for a in AMS}
        bound = any_bound(kept, ds, total)
        rows.append({"dataset": ds, "keys": m.split("_")[2][1:], "fetch": fetch,
                     "outside": outside_executor(kept, ds, total), "bound": bound,
                     "bound_hash": bound / v["hash"] if bound and v["hash"] else None,
                     "bound_btree": bound / v["btree"] if bound and v["btree"] else None,
                     "pmhash_hash": v["pmhash"] / v["hash"] if v["pmhash"] and v["hash"] else None,
                     "pmhash_bound": v["pmhash"] / bound if v["pmhash"] and bound else None})
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    return sorted(rows, key=lambda r: (order.index(r["dataset"]), int(r["keys"])))


def bound_note(kept, row):
    """For a failed row: the index-free bound, or hash's second copy, in the same cell; for
    "k = ANY", the time outside the executor and the bound it is part of."""
    if row["section"] == "sql" and row["key"].startswith("any_") and row["hash"] and row["btree"]:
        outside = outside_executor(kept, row["dataset"], row["key"])
        if outside is None:
            return ""
        note = ("; outside the executor (parse, plan, transfer) at least %s ms, %s x hash, %s x btree"
                % (fmt(outside), fmt(outside / row["hash"]), fmt(outside / row["btree"])))
        bound = any_bound(kept, row["dataset"], row["key"])
        if bound is not None:
            note += ("; with the rows' fetch by TID, no index at all: %s ms, %s x hash, %s x btree"
                     % (fmt(bound), fmt(bound / row["hash"]), fmt(bound / row["btree"])))
        return note
    if row["section"] != "pgbench" or not row["hash"]:
        return ""
    if row["key"].startswith("tpcb_c"):
        control = kept.get(("pgbench", row["dataset"], "hash2", row["key"]))
        return "; hash's second copy: %s x hash" % fmt(control / row["hash"]) if control else ""
    bound = kept.get(("pgbench", row["dataset"], "tid", row["key"]))
    if not bound or not row["btree"]:
        return ""
    if "_exec" in row["key"] or "_median" in row["key"]:
        calc = kept.get(("pgbench", row["dataset"], "tidcalc", row["key"]))
        note = "; no index at all, by TID: %s us, %s x hash, %s x btree" % (
            fmt(bound), fmt(bound / row["hash"]), fmt(bound / row["btree"]))
        if calc:
            note += "; the cheapest index (tidcalc): %s us, %s x hash, %s x btree" % (
                fmt(calc), fmt(calc / row["hash"]), fmt(calc / row["btree"]))
        return note
    return "; no index at all, by TID: %s x hash, %s x btree" % (fmt(bound / row["hash"]),
                                                                fmt(bound / row["btree"]))


BOUND_COLUMNS = [("dataset", "data set"), ("protocol", "protocol"), ("clients", "clients"),
                 ("bound", "no index, by TID (tps)"), ("bound_hash", "bound/hash"),
                 ("bound_btree", "bound/btree"), ("calc", "tidcalc (tps)"),
                 ("calc_hash", "tidcalc/hash"), ("pmhash_bound", "pmhash/bound")]
BOUND_TEXT = ("pgbench select-only with no index on pgbench_accounts, each row fetched by its TID "
              "(best of the repetitions): no index on aid can beat it, so bound/hash and bound/btree "
              "are the most any index could reach against hash and btree (with prepared statements "
              "each execution builds the TID with pmhash_bench_tid, a C function); tidcalc is the "
              "same table with the cheapest index there can be, one that computes the TID from the "
              "aid (test/bench/am/bench_tidcalc.c), so its runs are index scans that cost nothing "
              "but being index scans")


ANY_BOUND_COLUMNS = [("dataset", "data set"), ("keys", "keys"), ("outside", "outside the executor (ms)"),
                     ("fetch", "fetch by TID, executor (ms)"), ("bound", "bound (ms)"),
                     ("bound_hash", "bound/hash"), ("bound_btree", "bound/btree"),
                     ("pmhash_hash", "pmhash/hash"), ("pmhash_bound", "pmhash/bound")]
ANY_BOUND_TEXT = ("\"k = ANY(array)\" with the array a constant, against the least time any index "
                  "could take: the least time outside the executor over the three indexes (parsing, "
                  "planning and transferring the query; the statement's best time minus its best "
                  "execution in the server) plus the best execution of the same rows fetched by "
                  "their TIDs with no index (ctid = ANY, test/bench/sql/any_tid.sql): every index "
                  "pays the first and fetches the rows, so bound/hash is the least ratio any index "
                  "could reach against hash")


SHARE_COLUMNS = [("dataset", "data set"), ("protocol", "protocol"), ("clients", "clients"),
                 ("statistic", "statistic"), ("bound", "by TID, no index (us)"),
                 ("tidcalc", "tidcalc share (us)"),
                 ("calc_hash", "tidcalc/hash, total"), ("pmhash", "pmhash share (us)"),
                 ("hash", "hash share (us)"), ("btree", "btree share (us)"),
                 ("pmhash_hash", "pmhash/hash"), ("pmhash_btree", "pmhash/btree")]
SHARE_TEXT = ("the select-only statement's execution time in the server, mean (pg_stat_statements) "
              "and median (the pmhash_bench histogram), best of the repetitions, minus that of the "
              "same row fetched by its TID with no index: what "
              "the index itself costs per lookup; tidcalc's share is what any index scan costs the "
              "executor with no index work at all, and tidcalc/hash, total, the least ratio of "
              "statement times any index could reach against hash")


CONTROL_COLUMNS = [("dataset", "data set"), ("clients", "clients"), ("hash", "hash (tps)"),
                   ("control", "hash's copy (tps)"), ("control_hash", "copy/hash"),
                   ("control_low", "lowest run pair"), ("control_high", "highest run pair"),
                   ("pmhash_hash", "pmhash/hash")]
CONTROL_TEXT = ("pgbench TPC-B-like on a second copy of hash's tables (medians of the repetitions; "
                "each run pair is the copy's run against hash's in the same repetition): two "
                "identical setups, so copy/hash shows how far apart noise alone puts them; a "
                "pmhash/hash ratio within that distance is not a difference the run can see")


COLUMNS = [("section", "section"), ("dataset", "data set"), ("metric", "metric"), ("unit", "unit"),
           ("pmhash", "pmhash"), ("hash", "hash"), ("btree", "btree"), ("pmhash_hash", "pmhash/hash"),
           ("pmhash_btree", "pmhash/btree"), ("spread", "spread %"), ("floor", "floor"),
           ("result", "result")]
# columns of words, aligned left; the others hold numbers
TEXT_COLUMNS = {"section", "dataset", "protocol", "statistic", "metric", "unit", "floor",
                "result"}


def text_table(rows, columns=COLUMNS):
    """The rows as a fixed-width text table."""
    cells = [[h for _, h in columns]] + [[fmt(r[k]) for k, _ in columns] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = []
    for n, c in enumerate(cells):
        lines.append("  ".join(v.ljust(w) if k in TEXT_COLUMNS else v.rjust(w)
                               for (k, _), v, w in zip(columns, c, widths)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def md_table(rows, columns=COLUMNS):
    """The rows as a markdown table."""
    out = ["| " + " | ".join(h for _, h in columns) + " |",
           "|" + "|".join("---" if k in TEXT_COLUMNS else "---:" for k, _ in columns) + "|"]
    for r in rows:
        cells = [fmt(r[k]) for k, _ in columns]
        if r.get("result") == "FAIL":
            cells[-1] = "**FAIL**"
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def method_notes(meta):
    """What was measured, and how, as markdown bullet points."""
    return """- One cluster, one run; pmhash files on /dev/shm with `PMEM_IS_PMEM_FORCE=1` (the pmem code path).
  Each timed SQL- and AM-level measurement is repeated (REPS), the order of the AMs rotated each
  repetition; the table keeps the **best** repetition (least time, most tps) and the median of sizes,
  WAL volumes and TPC-B-like tps (whose runs wait on WAL flushes, so the best is the luckiest). Ratios are pmhash / hash and pmhash / btree: below 1 is better for times and sizes,
  above 1 for tps.
- **Build**: `CREATE INDEX` on the table holding only that index, after a `CHECKPOINT`, timed around
  the statement from the client's side (commit included). **Size**: `pg_total_relation_size` of the
  index, plus `file_bytes` of `pmhash_stats` for pmhash (its file; the main fork is one metapage).
- **Probes**: `count(*), sum(t.id)` of a probe table of PROBES keys in random order joined to the
  table, forced to a nested loop of index scans (hash/merge join, seqscan, bitmapscan, memoize off,
  jit off, no parallel workers); absent keys are random keys checked not to be in the table. Time per
  probe = statement time / probes, including the probe table's scan and, for present keys, the heap
  fetch. One untimed warm-up pass first; row counts and id sums are checked against a hash join.
- **`k = ANY(array)`**: `count(*), sum(id)` of the rows whose key is in an array of ANY_KEYS keys,
  half present (from the probe table), half absent; the planner picks the scan (it must use the
  index), no parallel workers. Once with the array written into the query (a constant: PostgreSQL
  hashes it for the recheck) and once as the parameter of a prepared statement's generic plan
  (`k = ANY($1)`, as ORMs send it: PostgreSQL's recheck then compares each row with every element;
  pmhash compares the rows' keys itself). Best of three runs after an untimed one; results checked
  against a hash join. Also each query's best execution time in the server (`pg_stat_statements`'
  `min_exec_time` of the four runs): the total minus it is parsing, planning and transferring the
  query, which every index pays alike; a failed floor names the least such time.
- **Insert**: one `INSERT ... SELECT` of INSERT_ROWS new random keys (autocommit, commit included)
  into the table that has the index (built after a checkpoint, so no full-page images of the index),
  timed per row; WAL bytes per row from `pg_current_wal_insert_lsn()` before and after. "Index share"
  subtracts the same insert into the table without any index. Afterwards the inserted keys are
  probed through the index and checked; the rows are then deleted and the table vacuumed.
- **Insert doubling the table** (data sets of GROW_DATASETS): the same, with as many new rows as the
  table holds, into an index built afresh (so it grows to twice its entries during the insert).
- **AM level**: `pmhash_bench_probe(index, keys, loops)` (test/bench/am/): one index scan, an
  `index_rescan` with an equality scan key per key and `index_getnext_tid` until done; no heap access,
  no executor. All three indexes exist at once; times are ns per probe over AM_LOOPS passes.
- **pgbench**: `pgbench -i` once per AM, each into a schema of its own (`pgb_<am>`, picked by
  `search_path`), `pgbench_accounts_pkey` dropped and `aid` indexed USING the AM (other tables keep
  their keys). For each `shared_buffers` setting of PGBENCH_SHARED_BUFFERS (the cluster is
  restarted with it; data set `scale<S>-sb<B>`): PostgreSQL's default 128MB is smaller than the
  tables at both scales, so heap and hash/btree index pages are read into the buffer pool as they
  are needed (pmhash's index lives in its mapped file, outside the pool); 2GB holds everything.
  Each repetition runs select-only (`-S`, simple protocol), select-only with prepared statements
  (`-S -M prepared`, so no planning per transaction) and TPC-B-like, 1 and 2 clients, the AMs'
  runs of each one right after another (order rotated each repetition). Before each run, on that
  AM's tables: history truncated, tables vacuumed, `CHECKPOINT`, `pgbench_accounts` and its index
  prewarmed; `pgbench -n -c C -j C -T PGBENCH_SECONDS`; tps without initial connection time; for
  select-only on an index also the statement's execution time in the server, without parsing,
  planning or the client round trip, which dominate tps on this machine: its mean
  (`pg_stat_statements`) and its median (the histogram of `test/bench/am/bench_exec_time.c`), both
  reset before the run; the floors are on the median, since the few executions in a thousand that
  the machine stalls for a millisecond or more move the mean by microseconds (they replace the old
  tps floors);
  for TPC-B-like also the WAL bytes per transaction (`pg_current_wal_insert_lsn()` around the run, so
  the full-page images after the checkpoint count, as they do in production). A 1-client run has
  pgbench and its backend pinned to the same CPU (`taskset`): unpinned, each round trip wakes an
  idle virtual CPU, which costs more than the transaction. Select-only also runs on a fourth copy,
  `pgb_tid`, with no index on `aid` and each row fetched by its TID
  (`test/bench/sql/pgb_select_by_tid.sql`, after `pgb_tid_layout.sql` checked that every row sits
  where its aid says; only select-only ever runs there): the bound no index can beat; and on a
  fifth, `pgb_tidcalc`, whose `aid` is indexed by tidcalc (`test/bench/am/bench_tidcalc.c`, an
  index that stores nothing and computes the TID from the aid; its build checks the layout and it
  refuses inserts): the cheapest index scan there can be, so its time above the fetch by TID is what
  any index scan costs the executor (opening and locking the index, scan keys and descriptor),
  which no index can save. TPC-B-like
  also runs on a second copy indexed by hash, `pgb_hash2`, in the rotation: its distance from
  hash is the noise of the cell.
- **spread %**: for timings and tps, the largest relative spread (max / min - 1) of one AM's
  repetitions of that figure; it shows how much noise the best-of figure was picked from (for
  TPC-B-like, see the noise table instead).
- The machine is shared: load averages are recorded above; other sessions' tests may have run
  concurrently, so differences within the spread are noise."""


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out")
    data = read_raw(os.path.join(out, "raw.csv"))
    meta = read_meta(os.path.join(out, "meta.txt"))
    rows, kept = build_rows(data)
    rows += core_rows(os.path.join(out, "core.csv"))

    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        keys = ["section", "dataset", "key", "metric", "unit", "better", "pmhash", "hash", "btree",
                "pmhash_hash", "pmhash_btree", "spread", "floor", "result"]
        w.writerow(keys)
        for r in rows:
            w.writerow(["" if r[k] is None else ("%.6g" % r[k] if isinstance(r[k], float) else r[k])
                        for k in keys])

    passed = sum(1 for r in rows if r["result"] == "PASS" and r["section"] != "core")
    failed = [r for r in rows if r["result"] == "FAIL" and r["section"] != "core"]
    core_checks = [r["result"] for r in rows if r["section"] == "core" and r["result"]]
    baseline = []
    for (s, ds, am, m), v in kept.items():
        if am == "none":
            baseline.append("%s %s %s" % (ds, m, fmt(v)))
    summary = "floors: %d PASS, %d FAIL" % (passed, len(failed))
    if core_checks:
        summary += "; core benchmark checks: %d PASS, %d FAIL" % (core_checks.count("PASS"),
                                                                 core_checks.count("FAIL"))

    md = ["# pmhash benchmark: pmhash vs hash vs btree", ""]
    for k in ("started", "runtime_s", "commit", "postgresql", "machine", "is_pmem", "parameters", "settings"):
        if k in meta:
            md.append("- %s: `%s`" % (k, meta[k]))
    md.append("- load averages (1, 5, 15 min) when each part started: " +
              "; ".join("%s `%s`" % (k[5:], v) for k, v in meta.items() if k.startswith("load_")))
    if baseline:
        md.append("- insert into the table without any index (baseline of the index shares): " +
                  ", ".join(baseline))
    md += ["", "## Results", "", md_table(rows), "", "**%s**" % summary, ""]
    if failed:
        md.append("Failed floors:")
        md.append("")
        for r in failed:
            md.append("- %s %s %s: pmhash %s, hash %s, btree %s (pmhash/hash %s, pmhash/btree %s; floor %s%s)" % (
                r["section"], r["dataset"], r["metric"], fmt(r["pmhash"]), fmt(r["hash"]), fmt(r["btree"]),
                fmt(r["pmhash_hash"]), fmt(r["pmhash_btree"]), r["floor"], bound_note(kept, r)))
        md.append("")
    bounds = bound_rows(kept)
    if bounds:
        md += ["## Bound of pgbench select-only", "", BOUND_TEXT + ".", "",
               md_table(bounds, BOUND_COLUMNS), ""]
    any_bounds = any_bound_rows(kept)
    if any_bounds:
        md += ["## Bound of k = ANY(constant)", "", ANY_BOUND_TEXT + ".", "",
               md_table(any_bounds, ANY_BOUND_COLUMNS), ""]
    shares = share_rows(kept)
    if shares:
        md += ["## Index share of select-only in the server", "", SHARE_TEXT + ".", "",
               md_table(shares, SHARE_COLUMNS), ""]
    controls = control_rows(data, kept)
    if controls:
        md += ["## Noise of pgbench TPC-B-like", "", CONTROL_TEXT + ".", "",
               md_table(controls, CONTROL_COLUMNS), ""]
    md += ["## Method", "", method_notes(meta), ""]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))

    print()
    print("== results (best of repetitions, median for TPC-B-like; ratios pmhash/hash, pmhash/btree)")
    for k, v in meta.items():
        if k.startswith("load_") or k in ("is_pmem", "parameters", "commit"):
            print("   %s: %s" % (k, v))
    if baseline:
        print("   no-index insert baseline: " + ", ".join(baseline))
    print()
    print(text_table(rows))
    if bounds:
        print()
        print("== " + BOUND_TEXT)
        print(text_table(bounds, BOUND_COLUMNS))
    if any_bounds:
        print()
        print("== " + ANY_BOUND_TEXT)
        print(text_table(any_bounds, ANY_BOUND_COLUMNS))
    if shares:
        print()
        print("== " + SHARE_TEXT)
        print(text_table(shares, SHARE_COLUMNS))
    if controls:
        print()
        print("== " + CONTROL_TEXT)
        print(text_table(controls, CONTROL_COLUMNS))
    print()
    print(summary)
    for r in failed:
        print("   FAIL %s %s %s (floor %s%s)" % (r["section"], r["dataset"], r["metric"], r["floor"],
                                             bound_note(kept, r)))


if __name__ == "__main__":
    main()
