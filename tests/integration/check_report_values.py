#!/usr/bin/python3
"""Checks every value d5 report plots against the result files it was drawn from: the page's
Vega-Lite specs (the JSON in <script id="d5-specs">) are read back and each data row is looked up
in the inputs, independently of d5's report code. Per kind of plot:

  overview      median and 95% CI of a case's primary time metric (any unit: s, ms, us, ns)
  violins       per case: median, CI, run count, quartiles between the order statistics that bound
                them, Tukey whiskers that are samples, the outlier count, every outlier a sample
  throughput    GFLOP/s median and CI of the case's gflops metric, GFLOP = extra.flops / 1e9
  breakdown     per operator type and pass: node count and summed seconds of extra.breakdown; the
                part outside operators: the executor's seconds less every node's
  peak          the throughput plot's peak line: the best FMA run of an input's manifest
  accuracy      every point of extra.curves.<curve> of a training run, inside its interval
  loss          every point of extra.curves.loss, with its training time
  divergence    each optimizer's loss per step (loss_a, loss_b of the divergence report)
  norms         a divergence report's l2 / l_inf per step, of one parameter or of all of them
  heatmaps      every cell of a forward-difference grid equals a grid in the result files
  scaling       time per rank count: the case's median and CI
  overhead      d5 ops overhead: the ratio's median and 95% CI of the case's "ratio" metric (d5 / native)
  data          d5 data bench's latency boxes: every plotted time is a DatasetLatency sample of the
                case, in the unit of the axis, and each case plots all of its samples
  rl            every point of a d5 rl run's learning curve (extra.runs[seed].curve: environment
                steps, seconds, mean return)
  history       a result history's point (d5 report --db): the median and CI of the case's metric in
                the result file of that machine and start time (the files imported into the database)

Usage: check_report_values.py REPORT.html RESULTS_DIR
Prints how many rows of each kind it checked; exit 1 naming each row that disagrees.
"""
import bisect
import glob
import json
import math
import os
import re
import statistics
import sys

SCALES = (1.0, 1e3, 1e6, 1e9)
failures = []
checked = {}


def fail(kind, what):
    failures.append(f"{kind}: {what}")


def count(kind):
    checked[kind] = checked.get(kind, 0) + 1


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def scale_of(shown, source):
    """The unit factor that turns a value in seconds (or its own unit) into the shown one."""
    for s in SCALES:
        if close(shown, source * s):
            return s
    return None


def specs_of(html):
    tag = '<script type="application/json" id="d5-specs">'
    b = html.index(tag) + len(tag)
    return json.loads(html[b:html.index("</script>", b)])


def rows_of(spec):
    rows = list(spec.get("data", {}).get("values", []))
    for layer in spec.get("layer", []):
        rows += layer.get("data", {}).get("values", [])
    return rows


class Inputs:
    def __init__(self, folder):
        self.cases = []        # (file name, case)
        self.runs = []         # (manifest, case)
        self.divergence = []   # divergence reports
        self.peaks = []        # manifest.extra.peak.fma_gflops.best of each result file
        for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
            with open(path) as f:
                j = json.load(f)
            if "cases" in j:
                self.divergence += [c["extra"] for c in j["cases"]
                                    if "steps" in c.get("extra", {}) and "twin" in c.get("extra", {})]
                self.cases += [(os.path.basename(path), c) for c in j["cases"]]
                self.runs += [(j.get("manifest", {}), c) for c in j["cases"]]
                peak = j.get("manifest", {}).get("extra", {}).get("peak", {}).get("fma_gflops", {})
                if "best" in peak:
                    self.peaks.append(peak["best"])
            elif "steps" in j and "optimizer" in j:
                self.divergence.append(j)

    def find(self, name, series):
        """The case named `name` of the series' backend (and file, where the series names one)."""
        backend, _, rest = series.partition(" \u00b7 ")
        # The report names the file by its stem, or by its path where two stems are alike.
        found = [c for f, c in self.cases
                 if c.get("name") == name and c.get("backend") == backend
                 and (not rest or os.path.splitext(f)[0] == rest or rest == f or rest.endswith("/" + f))]
        return found[0] if len(found) == 1 else None


def metric(case, name=None):
    ms = case.get("metrics", [])
    if name is None:
        return ms[0] if ms else None
    return next((m for m in ms if m["name"] == name), None)


def summary(m):
    s = m.get("summary", {})
    ci = s.get("median_ci", {})
    return s.get("median"), ci.get("lower"), ci.get("upper")


def check_median_ci(kind, row, m, s=None):
    median, lo, hi = summary(m)
    s = s or scale_of(row["median"], median)
    if lo is None or hi is None:  # no CI in the file (too few runs): none, or one collapsed onto the median
        ci_ok = (row.get("ci_lo") is None and row.get("ci_hi") is None) or \
            (s is not None and close(row["ci_lo"], median * s) and close(row["ci_hi"], median * s))
    else:
        ci_ok = s is not None and close(row["ci_lo"], lo * s) and close(row["ci_hi"], hi * s)
    if s is None or not ci_ok:
        fail(kind, f"{row.get('case')} {row.get('series')}: shown {row['median']} [{row['ci_lo']}, {row['ci_hi']}], "
                   f"file {median} [{lo}, {hi}]")
        return None
    return s


def check_overview(inputs, row):
    case = inputs.find(row["case"], row["series"])
    if case is None:
        return fail("overview", f"no case {row['case']!r} for {row['series']!r}")
    if check_median_ci("overview", row, metric(case)) is not None:
        count("overview")


def bounded_by_order_statistics(q, xs, p):
    """q lies between the two order statistics every common quantile definition interpolates."""
    pos = p * (len(xs) - 1)
    return xs[math.floor(pos)] * (1 - 1e-12) <= q <= xs[math.ceil(pos)] * (1 + 1e-12) or \
        xs[max(0, math.floor(pos) - 1)] <= q <= xs[min(len(xs) - 1, math.ceil(pos) + 1)]


def check_violin(inputs, rows):
    stats = [r for r in rows if r["kind"] == "stats"]
    for row in stats:
        case = inputs.find(row["case"], row["series"])
        if case is None:
            fail("violins", f"no case {row['case']!r} for {row['series']!r}")
            continue
        m = metric(case)
        s = check_median_ci("violins", row, m)
        if s is None:
            continue
        xs = sorted(x * s for x in m["samples"])
        ok = row["runs"] == len(xs) and close(row["median"], statistics.median(xs))
        ok = ok and bounded_by_order_statistics(row["q1"], xs, 0.25) and bounded_by_order_statistics(row["q3"], xs, 0.75)
        ok = ok and row["whisker_lo"] in xs and row["whisker_hi"] in xs
        outside = sum(1 for x in xs if x < row["whisker_lo"] or x > row["whisker_hi"])
        ok = ok and row["Tukey outliers"] == outside
        for o in (r for r in rows if r["kind"] == "outlier" and r.get("case") == row["case"]
                  and r["series"] == row["series"]):
            i = bisect.bisect_left(xs, o["t"] * (1 - 1e-12))
            ok = ok and i < len(xs) and close(xs[i], o["t"])
        if not ok:
            fail("violins", f"{row['case']} {row['series']}: {row} against {len(xs)} samples")
        else:
            count("violins")


def check_throughput(inputs, row):
    case = inputs.find(row["case"], row["series"])
    m = case and metric(case, "gflops")
    if not m:
        return fail("throughput", f"no gflops of {row['case']!r} for {row['series']!r}")
    if check_median_ci("throughput", row, m, 1.0) and close(row["gflop"], case["extra"]["flops"] / 1e9):
        count("throughput")
    else:
        fail("throughput", f"{row}: GFLOP {case['extra'].get('flops')}")


TIME_FACTORS = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
axis_time_factor = 1e6  # set per plot from its x axis title, "mean time per call (UNIT)"


def set_axis_time_factor(spec):
    global axis_time_factor
    title = str(spec.get("encoding", {}).get("x", {}).get("title", ""))
    m = re.search(r"\((s|ms|us|ns)\)$", title)
    axis_time_factor = TIME_FACTORS[m.group(1)] if m else 1e6


def check_breakdown(inputs, row):
    cases = [c for _, c in inputs.cases if c.get("name") == row["case"] and "breakdown" in c.get("extra", {})]
    if len(cases) != 1:
        return fail("breakdown", f"no breakdown of {row['case']!r}")
    b = cases[0]["extra"]["breakdown"]
    if row["part"] == "outside operators":
        nodes = []
        seconds = b["executor_seconds"] - sum(n["seconds"] for n in b["nodes"])
    else:
        op, _, rest = row["part"].partition(" (")
        nodes = [n for n in b["nodes"] if n["op_type"] == op and n.get("pass", "forward") == rest.rstrip(")")]
        seconds = sum(n["seconds"] for n in nodes)
    percent = 100 * seconds / b["executor_seconds"]
    # "time" is in the unit the x axis names (the report picks s, ms, us or ns by the median call).
    if row["nodes"] == len(nodes) and close(row["seconds"], seconds, 1e-6) and \
            close(row["time"], seconds * axis_time_factor, 1e-6) and close(row["percent"], percent, 1e-6):
        count("breakdown")
    else:
        fail("breakdown", f"{row}: {len(nodes)} nodes, {seconds} s in the file")


def training_cases(inputs, run):
    return [c for _, c in inputs.cases if "curves" in c.get("extra", {}) and run.startswith(c["name"].split("/")[0])]


def curve_point(inputs, run, curve, step):
    for c in training_cases(inputs, run):
        for p in c["extra"]["curves"].get(curve, []):
            if p["step"] == step:
                yield p


def check_accuracy(inputs, row):
    points = list(curve_point(inputs, row["run"], row["curve"], row["step"]))
    if any(close(p["value"], row["accuracy"]) for p in points) and row["lo"] <= row["accuracy"] <= row["hi"]:
        count("accuracy")
    else:
        fail("accuracy", f"{row} not in the file ({points})")


def check_loss(inputs, row):
    points = list(curve_point(inputs, row["run"], "loss", row["step"]))
    if any(close(p["value"], row["loss"]) and close(p["training_time_s"], row["time"]) for p in points):
        count("loss")
    else:
        fail("loss", f"{row} not in the file ({points})")


def check_divergence(inputs, row):
    for d in inputs.divergence:
        key = "loss_a" if row["optimizer"] == d["optimizer"] else "loss_b" if row["optimizer"] == d["twin"] else None
        steps = d["steps"]
        i = int(row["step"]) - 1
        if key and 0 <= i < len(steps) and close(steps[i][key], row["loss"]):
            count("divergence")
            return
    fail("divergence", f"{row} not in a divergence report")


def check_divergence_norm(inputs, row):
    for d in inputs.divergence:
        for s in d["steps"]:
            if s.get("step") != row["step"]:
                continue
            v = s if row["parameter"] == "all parameters" else s.get("params", {}).get(row["parameter"])
            if v is not None and row["norm"] in v and close(v[row["norm"]], row["value"]):
                count("norms")
                return
    fail("norms", f"{row} not in a divergence report")


def heatmaps(value):
    if isinstance(value, dict):
        if "heatmap" in value and isinstance(value["heatmap"], dict):
            yield value["heatmap"]
        for v in value.values():
            yield from heatmaps(v)
    elif isinstance(value, list):
        for v in value:
            yield from heatmaps(v)


def check_heatmap(inputs, rows):
    grids = [h for _, c in inputs.cases for h in heatmaps(c.get("extra", {}))]
    for panel in sorted({r["panel"] for r in rows}):
        cells = [r for r in rows if r["panel"] == panel]

        def matches(h):
            if h["rows"] * h["cols"] != len(cells):
                return False
            for r in cells:
                v = h["values"][r["row"]][r["col"]]
                if (v is None) != (r["diff"] is None) or (v is not None and not close(v, r["diff"])):
                    return False
            return True
        if any(matches(h) for h in grids):
            count("heatmaps")
        else:
            fail("heatmaps", f"panel {panel!r}: no grid of the result files has these {len(cells)} cells")


def check_scaling_time(inputs, row):
    cases = [c for _, c in inputs.cases
             if c.get("name", "").split("/ranks=")[0] == row["series"]
             and (c.get("params", {}).get("ranks") or c.get("extra", {}).get("ranks")) == row["ranks"]]
    if len(cases) == 1:
        median, lo, hi = summary(metric(cases[0]))
        s = scale_of(row["value"], median)
        if lo is None or hi is None:  # no CI: the interval collapses onto the median
            lo = hi = median
        if s is not None and close(row["lo"], lo * s) and close(row["hi"], hi * s):
            return count("scaling")
    fail("scaling", f"{row}: {len(cases)} case(s) in the files")


def check_peak(inputs, row):
    if any(close(row["peak"], p) for p in inputs.peaks):
        count("peak")
    else:
        fail("peak", f"{row}: the inputs' peaks are {inputs.peaks}")


def check_history(inputs, row):
    """A point of a history plot, series "CASE @ BACKEND on MACHINE", against the result file of
    that machine and start time."""
    case_backend, _, machine = row["series"].rpartition(" on ")
    name, _, backend = case_backend.rpartition(" @ ")
    found = [c for m, c in inputs.runs
             if m.get("hostname") == machine and m.get("start_time_utc") == row["start"]
             and c.get("name") == name and c.get("backend") == backend]
    m = metric(found[0], row["metric"]) if len(found) == 1 else None
    if m is None or not m.get("samples"):
        return fail("history", f"{row['series']} at {row['start']}: {len(found)} matching case(s) in the files")
    median, lo, hi = summary(m)
    if median is None:
        median = statistics.median(m["samples"])
    s = scale_of(row["value"], median)
    if s is None:
        return fail("history", f"{row['series']} at {row['start']}: shown {row['value']}, file median {median}")
    if lo is None or hi is None:  # no CI in the file: the shown one must bracket the median within the samples
        ok = min(m["samples"]) * s <= row["lo"] * (1 + 1e-9) and row["lo"] <= row["value"] <= row["hi"] and \
            row["hi"] <= max(m["samples"]) * s * (1 + 1e-9)
    else:
        ok = close(row["lo"], lo * s) and close(row["hi"], hi * s)
    if not ok:
        return fail("history", f"{row['series']} at {row['start']}: CI shown [{row['lo']}, {row['hi']}], file [{lo}, {hi}]")
    count("history")


def check_rl_curve(inputs, row):
    case = inputs.find(row["case"], row["series"])
    runs = [r for r in (case or {}).get("extra", {}).get("runs", []) if r.get("seed") == row["seed"]]
    if len(runs) == 1 and any(p[0] == row["env_steps"] and close(p[1], row["seconds"]) and close(p[2], row["mean_return"])
                              for p in runs[0]["curve"]):
        count("rl")
    else:
        fail("rl", f"{row} not in the file")


def check_dataset_latency(inputs, spec, rows):
    title = spec.get("spec", {}).get("encoding", {}).get("y", {}).get("title", "")
    m = re.search(r"\((s|ms|us|ns)\)$", title)
    if not m:
        return fail("data", f"no time unit in the axis title {title!r}")
    factor = TIME_FACTORS[m.group(1)]
    by_case = {}
    for row in rows:
        by_case.setdefault((row["file"], row["case"]), []).append(row["t"])
    for (file, name), shown in by_case.items():
        cases = [c for f, c in inputs.cases
                 if f == file and c.get("name") == name and metric(c) and metric(c)["name"] == "DatasetLatency"]
        if len(cases) != 1:
            fail("data", f"{name!r}: {len(cases)} DatasetLatency cases of that name in the files")
            continue
        samples = sorted(v * factor for v in metric(cases[0])["samples"])
        if len(samples) != len(shown) or any(not close(a, b) for a, b in zip(samples, sorted(shown))):
            fail("data", f"{name!r}: the plotted times are not the case's {len(samples)} samples")
        else:
            count("data")


def check_native_overhead(inputs, row):
    case = inputs.find(row["case"], row["series"])
    m = metric(case, "ratio") if case else None
    if m is None:
        return fail("overhead", f"no ratio of case {row['case']!r} for {row['series']!r}")
    shown = {"median": row["ratio"], "ci_lo": row["ratio_lo"], "ci_hi": row["ratio_hi"], "case": row["case"],
             "series": row["series"]}
    if check_median_ci("overhead", shown, m, 1.0) is not None:
        count("overhead")


def count_derived(_inputs, _row):
    count("scaling (derived; tests/unit/report)")


# Which check a row of a plot gets, by the fields it has; the first that matches.
ROW_CHECKS = [
    (lambda r: "mean_return" in r, check_rl_curve),
    (lambda r: "gflop" in r, check_throughput),
    (lambda r: "ratio_lo" in r, check_native_overhead),
    (lambda r: "median" in r and "case" in r, check_overview),
    (lambda r: "part" in r, check_breakdown),
    (lambda r: "curve" in r, check_accuracy),
    (lambda r: "run" in r and "loss" in r, check_loss),
    (lambda r: "optimizer" in r, check_divergence),
    (lambda r: "norm" in r and "parameter" in r, check_divergence_norm),
    (lambda r: "peak" in r, check_peak),
    (lambda r: "time [95% CI]" in r, check_scaling_time),
    (lambda r: "commit" in r and "start" in r, check_history),
    (lambda r: "efficiency [interval]" in r or "bytes per rank" in r, count_derived),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-3])
    with open(sys.argv[1]) as f:
        specs = specs_of(f.read())
    inputs = Inputs(sys.argv[2])
    for spec in specs:
        rows = rows_of(spec)
        if not rows:
            continue
        keys = set(rows[0])
        set_axis_time_factor(spec)
        if "kind" in keys:
            check_violin(inputs, rows)
        elif "access" in keys:
            check_dataset_latency(inputs, spec, rows)
        elif "panel" in keys:
            check_heatmap(inputs, rows)
        else:
            for row in rows:
                check = next((c for wanted, c in ROW_CHECKS if wanted(row)), None)
                if check:
                    check(inputs, row)
                else:
                    fail("unknown", f"a plotted row this checker does not know: {sorted(row)}")
    for kind in sorted(checked):
        print(f"{kind}: {checked[kind]} checked")
    for f in failures:
        print("MISMATCH " + f)
    print(f"{sum(checked.values())} rows checked, {len(failures)} mismatch(es)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
