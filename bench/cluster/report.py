#!/usr/bin/env python3
"""Turns a run-experiments.sh result directory into docs/results.md and docs/results/*.svg.

    report.py RESULT_DIR [--docs DOCS_DIR] [--compare OTHER_RESULT_DIR]

Tables: the paper's Fig. 4 (a)(b) per learner count, (d)(e) per size, (c) reduce calls beside
the Eq. 12 bound, the second set (asymmetric links, latency), measured against predicted for
every point, and the goals of the experiment with the margin by which each is met or missed.
The text in bench/cluster/results-notes.md (the discussion) is appended as it is.
"""
import argparse
import json
import os
import statistics
import sys

from results_data import ALGORITHMS, eq12_bound, load_results
from svgplot import PALETTE, Chart, size_label

HERE = os.path.dirname(os.path.abspath(__file__))
SHORT = {"default": "plan", "flexreduce": "FR", "ring": "ring", "blueconnect": "BLC",
         "hierarchical": "hier", "mpi": "MPI"}
# The paper's measured savings of FlexReduce over NCCL's ring (Sec. V-A)
PAPER_SAVING = {2: (0.32, 0.42), 3: (0.21, 0.25)}
RATIO_GOAL = 0.10   # measured within 10% of predicted
FLOOR_GOAL = 1.2    # the default plan within 1.2x the floor at the large size (links set)
NOISE = 0.05        # "never slower beyond noise": plans priced alike measured up to ~5-10% apart
PAIR_SMALL = 512 << 10  # run-experiments.sh's SMALL


def ms(seconds):
    if seconds is None:
        return "-"
    v = seconds * 1e3
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def pct(x):
    return "-" if x is None else f"{x * 100:.0f}%"


def shape(c):
    return "+".join(map(str, c["learners"]))


def learners(c):
    return sum(c["learners"])


def point(c, algorithm, size):
    if algorithm == "mpi":
        return c["mpi"].get(size)
    return c["measured"].get(algorithm, {}).get(size)


def median(c, algorithm, size):
    p = point(c, algorithm, size)
    return p.get("median") if p else None


def predicted(c, algorithm, size):
    return c["predicted"].get(algorithm, {}).get(size)


def sizes_of(c):
    return sorted({s for per in c["measured"].values() for s in per})


def floor(c, size):
    return c["floor"].get(size)


def over_floor(c, algorithm, size):
    m, f = median(c, algorithm, size), floor(c, size)
    return m / f if m and f else None


def saving(c, size, base="ring", measured=True, algorithm="flexreduce"):
    get = median if measured else predicted
    fr, other = get(c, algorithm, size), get(c, base, size)
    return None if not fr or not other else 1 - fr / other


def speedup_fraction(c, size):
    """The paper's figure: measured speedup over ring as a fraction of the predicted one."""
    fr_m, ring_m = median(c, "flexreduce", size), median(c, "ring", size)
    fr_p, ring_p = predicted(c, "flexreduce", size), predicted(c, "ring", size)
    if not all((fr_m, ring_m, fr_p, ring_p)):
        return None
    return (ring_m / fr_m) / (ring_p / fr_p)


def cell(c, algorithm, size):
    p = point(c, algorithm, size)
    if not p or p.get("median") is None:
        return "-"
    text = ms(p["median"])
    if p.get("min") is not None and p.get("max") is not None:
        text += f" <sub>{ms(p['min'])}–{ms(p['max'])}</sub>"
    if p.get("wrong"):
        text += f" **#wrong={p['wrong']}**"
    return text


def links_text(c):
    rates = ", ".join(c["rates"])
    delays = ", ".join(str(d) for d in c["delays_us"])
    return f"{rates}" + (f"; +{delays} us" if any(c["delays_us"]) else "")


# ---- tables
def table_times(configs, size, title):
    rows = [f"#### {title}", "",
            "| learners | machines | " + " | ".join(SHORT[a] for a in ALGORITHMS + ["mpi"])
            + " | floor | plan / floor | plan saving vs ring: measured / predicted "
            "| FR saving vs ring: measured / predicted / paper | FR / BLC | FR saving vs MPI "
            "| fraction of predicted speedup |",
            "|---" * (2 + len(ALGORITHMS) + 1 + 7) + "|"]
    for c in configs:
        if size not in sizes_of(c):
            continue
        paper = PAPER_SAVING.get(len(c["learners"])) if c["set"] == "paper" else None
        fr, blc = median(c, "flexreduce", size), median(c, "blueconnect", size)
        cells = [str(learners(c)), shape(c)] + [cell(c, a, size) for a in ALGORITHMS + ["mpi"]]
        ratio = over_floor(c, "default", size)
        cells.append(ms(floor(c, size)))
        cells.append(f"{ratio:.2f}" if ratio else "-")
        cells.append(f"{pct(saving(c, size, algorithm='default'))} / "
                     f"{pct(saving(c, size, measured=False, algorithm='default'))}")
        cells.append(f"{pct(saving(c, size))} / {pct(saving(c, size, measured=False))} / "
                     + (f"{paper[0] * 100:.0f}–{paper[1] * 100:.0f}%" if paper else "-"))
        cells.append(f"{fr / blc:.2f}" if fr and blc else "-")
        cells.append(pct(saving(c, size, base="mpi")))
        cells.append(pct(speedup_fraction(c, size)))
        rows.append("| " + " | ".join(cells) + " |")
    return rows + [""]


def table_ratios(configs):
    rows = ["| configuration | size | " + " | ".join(SHORT[a] for a in ALGORITHMS) + " |",
            "|---|---|" + "---|" * len(ALGORITHMS)]
    for c in configs:
        for size in sizes_of(c):
            cells = []
            for a in ALGORITHMS:
                m, p = median(c, a, size), predicted(c, a, size)
                if not m or not p:
                    cells.append("-")
                    continue
                r = m / p
                mark = "" if abs(r - 1) <= RATIO_GOAL else " ⚠"
                cells.append(f"{r:.2f}{mark}")
            rows.append(f"| {c['id']} ({shape(c)}) | {size_label(size)} | " + " | ".join(cells) + " |")
    return rows + [""]


def table_sweep(c):
    rows = [f"#### {learners(c)} learners ({shape(c)}): measured (predicted), ms", "",
            "| size | " + " | ".join(SHORT[a] for a in ALGORITHMS) + " | MPI | floor | plan runs |",
            "|---|" + "---|" * (len(ALGORITHMS) + 3)]
    for size in sizes_of(c):
        cells = [f"{ms(median(c, a, size))} ({ms(predicted(c, a, size))})" for a in ALGORITHMS]
        rows.append(f"| {size_label(size)} | " + " | ".join(cells) + f" | {ms(median(c, 'mpi', size))}"
                    f" | {ms(floor(c, size))} | {c['chosen'].get(size, '-')} |")
    return rows + [""]


def table_calls(configs):
    rows = ["| learners | machines | top-step reduce calls per learner: avg / max | ops a learner "
            "takes part in: avg / max | Eq. 12 bound (max) | all reduce-scatter steps: avg / max |",
            "|---|---|---|---|---|---|"]
    for c in configs:
        k = c["calls"]
        if not k:
            continue
        bound = eq12_bound(c["learners"])
        avg = lambda xs: f"{statistics.mean(xs):.2f}"
        rows.append(f"| {learners(c)} | {shape(c)} | {avg(k['top_rooted'])} / {max(k['top_rooted'])} "
                    f"| {avg(k['top_joined'])} / {max(k['top_joined'])} | {max(bound)} "
                    f"| {avg(k['total_rooted'])} / {max(k['total_rooted'])} |")
    return rows + [""]


def table_calibration(configs):
    rows = ["| configuration | links set | link goodput, Mbit/s (up/down) | one-way latency "
            "between machines, us | shared memory: latency us, bandwidth GB/s | runtime cost per "
            "hop, us | load | TCP congestion control | learners' UCX_/FLEXPLAN_ settings |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in configs:
        k = c["calibration"]
        if not k:
            rows.append(f"| {c['id']} | {links_text(c)} | skipped: {c['skipped']} | | | | | | |")
            continue
        m = k["measured"]
        good = ", ".join(f"{g.get('up', 0):.0f}/{g.get('down', 0):.0f}" for g in m["link_goodput_mbit"])
        lat = ", ".join(f"{p['a']}-{p['b']}: {p['latency_us']:.0f}" for p in m["cross_machine_latency_us"])
        hop = f"{c['hops']['hop_overhead_s'] * 1e6:.0f}" if c["hops"] else "-"
        env = f"`{c['env']}`" if c["env"] else "defaults"
        rows.append(f"| {c['id']} ({shape(c)}) | {links_text(c)} | {good} | {lat} | "
                    f"{m['intra_machine_latency_us']:.1f}, "
                    f"{m['intra_machine_bandwidth_bytes_per_s'] / 1e9:.1f} | {hop} | "
                    f"{c['load'] or '-'} | {c['congestion_control']} | {env} |")
    return rows + [""]


def table_compare(configs, others, label, other_label):
    """This run beside another of the same configurations (other settings, other build)."""
    by_id = {c["id"]: c for c in others}
    rows = [f"Each cell: **{label}** / {other_label} (ms, medians).", "",
            "| configuration | size | " + " | ".join(SHORT[a] for a in ALGORITHMS + ["mpi"])
            + " | FR saving vs ring |",
            "|---|---|" + "---|" * (len(ALGORITHMS) + 2)]
    ratios = {a: [] for a in ALGORITHMS + ["mpi"]}
    for c in configs:
        o = by_id.get(c["id"])
        if not o:
            continue
        for size in sizes_of(c):
            if size not in sizes_of(o):
                continue
            cells = []
            for a in ALGORITHMS + ["mpi"]:
                x, y = median(c, a, size), median(o, a, size)
                cells.append(f"**{ms(x)}** / {ms(y)}")
                if x and y:
                    ratios[a].append(y / x)
            rows.append(f"| {c['id']} ({shape(c)}) | {size_label(size)} | " + " | ".join(cells)
                        + f" | **{pct(saving(c, size))}** / {pct(saving(o, size))} |")
    summary = ", ".join(f"{SHORT[a]} {statistics.median(r):.2f}x" for a, r in ratios.items() if r)
    return rows + ["", f"{other_label} over {label}, median per algorithm: {summary}.", ""]


# ---- goals
def goals(configs):
    lines = []
    paper = [c for c in configs if c["set"] == "paper" and c["measured"]]
    everything = [c for c in configs if c["measured"]]
    # 1. saving over ring within a few points of the paper's range, at the large size
    for c in paper:
        size = max(sizes_of(c))
        s, rng = saving(c, size), PAPER_SAVING.get(len(c["learners"]))
        if s is None or not rng:
            continue
        gap = 0 if rng[0] <= s <= rng[1] else (rng[0] - s if s < rng[0] else s - rng[1])
        verdict = "within" if gap == 0 else ("within 3 points of" if gap <= 0.03 else "outside")
        lines.append(f"- {learners(c)} learners ({shape(c)}), {size_label(size)}: FR saves "
                     f"{s * 100:.1f}% over ring, {verdict} the paper's "
                     f"{rng[0]*100:.0f}–{rng[1]*100:.0f}%"
                     + (f" (by {gap * 100:.1f} points)" if gap > 0 else ""))
    lines += links_goals([c for c in configs if c["set"] == "links" and c["measured"]])
    # the default plan on the paper set: never slower than FlexReduce alone beyond noise
    behind = []
    for c in paper:
        for size in sizes_of(c):
            d, fr = median(c, "default", size), median(c, "flexreduce", size)
            if d and fr and d > fr * (1 + NOISE):
                behind.append(f"{c['id']} {size_label(size)} ({d / fr:.2f}x)")
    if paper:
        lines.append(f"- paper set: the default plan never slower than FR beyond {NOISE * 100:.0f}%: "
                     + ("yes" if not behind else "no, slower at " + ", ".join(behind)))
    # 2. FlexReduce never slower than BlueConnect
    slower = []
    for c in everything:
        for size in sizes_of(c):
            fr, blc = median(c, "flexreduce", size), median(c, "blueconnect", size)
            if fr and blc and fr > blc * 1.02:
                slower.append(f"{c['id']} {size_label(size)} ({fr / blc:.2f}x)")
    lines.append("- FR never slower than BLC (2% tolerance): "
                 + ("yes" if not slower else "no, slower at " + ", ".join(slower)))
    # 3. measured within 10% of predicted
    ratios = [(median(c, a, s) / predicted(c, a, s), c, a, s) for c in everything
              for s in sizes_of(c) for a in ALGORITHMS if median(c, a, s) and predicted(c, a, s)]
    if ratios:
        inside = sum(1 for r, *_ in ratios if abs(r - 1) <= RATIO_GOAL)
        worst = max(ratios, key=lambda t: abs(t[0] - 1))
        lines.append(f"- measured within 10% of predicted: {inside} of {len(ratios)} points; "
                     f"worst {worst[1]['id']} {SHORT[worst[2]]} {size_label(worst[3])}: "
                     f"{worst[0]:.2f}x the prediction")
        for a in ALGORITHMS:
            rs = [r for r, _, alg, s in ratios if alg == a]
            if rs:
                lines.append(f"  - {SHORT[a]}: measured/predicted median {statistics.median(rs):.2f}, "
                             f"range {min(rs):.2f}–{max(rs):.2f}")
    with_hops = [(median(c, a, s), c["predicted_hops"].get(a, {}).get(s)) for c in everything
                 for s in sizes_of(c) for a in ALGORITHMS]
    with_hops = [m / p for m, p in with_hops if m and p]
    if with_hops:
        inside = sum(1 for r in with_hops if abs(r - 1) <= RATIO_GOAL)
        lines.append(f"- the model with the runtime's measured cost per hop added "
                     f"(`predict-hops.txt`): {inside} of {len(with_hops)} points within 10%, "
                     f"measured/predicted median {statistics.median(with_hops):.2f}, range "
                     f"{min(with_hops):.2f}–{max(with_hops):.2f}")
    large_only = [(median(c, a, max(sizes_of(c))), predicted(c, a, max(sizes_of(c))))
                  for c in everything for a in ALGORITHMS]
    large_only = [m / p for m, p in large_only if m and p]
    if large_only:
        inside = sum(1 for r in large_only if abs(r - 1) <= RATIO_GOAL)
        lines.append(f"- at the large size alone: {inside} of {len(large_only)} points within 10%, "
                     f"measured/predicted median {statistics.median(large_only):.2f}, range "
                     f"{min(large_only):.2f}–{max(large_only):.2f}")
    fractions = [speedup_fraction(c, max(sizes_of(c))) for c in paper]
    fractions = [f for f in fractions if f]
    if fractions:
        lines.append(f"- fraction of the predicted speedup over ring reached at the large size: "
                     f"{min(fractions) * 100:.0f}–{max(fractions) * 100:.0f}% (paper: 90–99%)")
    wrong = [f"{c['id']} {SHORT[a]} {size_label(s)}" for c in everything for a in ALGORITHMS
             for s, p in c["measured"].get(a, {}).items() if p.get("wrong")]
    unchecked = [f"{c['id']} {SHORT[a]} {size_label(s)}" for c in everything for a in ALGORITHMS
                 for s, p in c["measured"].get(a, {}).items() if p.get("wrong", 0) is None]
    lines.append("- every run checked its result: "
                 + ("#wrong = 0 everywhere" if not wrong else "WRONG RESULTS at " + ", ".join(wrong))
                 + ("" if not unchecked else "; NOT CHECKED at " + ", ".join(unchecked)))
    for c in configs:
        if c["skipped"]:
            lines.append(f"- {c['id']}: not measured ({c['skipped']})")
        for e in c["errors"]:
            lines.append(f"- {c['id']}: {e}")
    return lines + [""]


def same_schedule_spread(configs):
    """Where the default plan ran the very schedule that a forced run also ran (its label is
    that algorithm's name, unpipelined), both measured the same thing: their ratio is the
    run's own noise. Returns the ratios (default / forced)."""
    ratios = []
    for c in configs:
        for size, label in c["chosen"].items():
            if label in c["measured"] and label != "default":
                d, f = median(c, "default", size), median(c, label, size)
                if d and f:
                    ratios.append(d / f)
    return ratios


def links_goals(links):
    """The goals for clusters with asymmetric links, each with its margin."""
    if not links:
        return []
    lines = []
    spread = same_schedule_spread(links)
    noise = NOISE
    if spread:
        worst = max(max(spread), 1 / min(spread)) - 1
        noise = max(NOISE, worst)
        lines.append(f"- noise: where the default plan ran the same schedule as a forced run "
                     f"({len(spread)} points), the two measured {min(spread):.2f}–{max(spread):.2f}x "
                     f"apart; \"beyond noise\" below means beyond {noise * 100:.0f}%")
    ratios = [(over_floor(c, "default", max(sizes_of(c))), c) for c in links]
    ratios = [(r, c) for r, c in ratios if r]
    if ratios:
        worst = max(ratios, key=lambda t: t[0])
        within = sum(1 for r, _ in ratios if r <= FLOOR_GOAL)
        lines.append(f"- links set, large size: the default plan within {FLOOR_GOAL}x the floor in "
                     f"{within} of {len(ratios)} configurations; measured/floor "
                     + ", ".join(f"{c['id']} {r:.2f}" for r, c in ratios)
                     + f" (worst {worst[1]['id']}, {worst[0]:.2f})")
    for base in ("ring", "hierarchical"):
        slower, ratios = [], []
        for c in links:
            for size in sizes_of(c):
                d, b = median(c, "default", size), median(c, base, size)
                if d and b:
                    ratios.append(d / b)
                    if d > b * (1 + noise):
                        slower.append(f"{c['id']} {size_label(size)} ({d / b:.2f}x)")
        if ratios:
            lines.append(f"- links set: the default plan never slower than {SHORT[base]} beyond "
                         f"{noise * 100:.0f}%: " + ("yes" if not slower else "no, slower at "
                                                     + ", ".join(slower))
                         + f"; plan/{SHORT[base]} median {statistics.median(ratios):.2f}, "
                         f"range {min(ratios):.2f}–{max(ratios):.2f}")
    points = [median(c, a, s) / predicted(c, a, s) for c in links for s in sizes_of(c)
              for a in ALGORITHMS if median(c, a, s) and predicted(c, a, s)]
    if points:
        inside = sum(1 for r in points if abs(r - 1) <= RATIO_GOAL)
        lines.append(f"- links set: {inside} of {len(points)} points "
                     f"({inside / len(points) * 100:.0f}%) within 10% of their prediction "
                     f"(goal: 90%)")
        for a in ALGORITHMS:
            rs = [median(c, a, s) / predicted(c, a, s) for c in links for s in sizes_of(c)
                  if median(c, a, s) and predicted(c, a, s)]
            if rs:
                inside = sum(1 for r in rs if abs(r - 1) <= RATIO_GOAL)
                lines.append(f"  - {SHORT[a]}: {inside} of {len(rs)} within 10%, measured/predicted "
                             f"median {statistics.median(rs):.2f}, range {min(rs):.2f}–{max(rs):.2f}")
    return lines


# ---- plots
def plot_learners(configs, size_of, title, path):
    chart = Chart(title, "learners", "all-reduce time (ms)", x_format=lambda v: f"{v:g}",
                  y_format=lambda v: f"{v * 1e3:g}")
    for a in ALGORITHMS + ["mpi"]:
        pts = []
        for c in configs:
            s = size_of(c)
            p = point(c, a, s) if s else None
            if p and p.get("median"):
                pts.append((learners(c), p["median"], p.get("min"), p.get("max")))
        chart.add(f"{SHORT[a]} measured", pts, PALETTE[a])
        if a != "mpi":
            chart.add(f"{SHORT[a]} predicted",
                      [(learners(c), predicted(c, a, size_of(c))) for c in configs if size_of(c)],
                      PALETTE[a], dashed=True)
    with open(path, "w") as f:
        f.write(chart.svg())


def plot_sizes(c, path):
    chart = Chart(f"{learners(c)} learners ({shape(c)}): time against size", "message size (bytes)",
                  "all-reduce time (ms)", x_log=True, y_log=True, x_format=size_label,
                  y_format=lambda v: f"{v * 1e3:g}", y_zero=False)
    for a in ALGORITHMS + ["mpi"]:
        chart.add(f"{SHORT[a]} measured",
                  [(s, p["median"], p.get("min"), p.get("max"))
                   for s in sizes_of(c) for p in [point(c, a, s)] if p and p.get("median")],
                  PALETTE[a])
        if a != "mpi":
            chart.add(f"{SHORT[a]} predicted", [(s, predicted(c, a, s)) for s in sizes_of(c)],
                      PALETTE[a], dashed=True)
    if c["floor"]:
        chart.add("floor", [(s, floor(c, s)) for s in sizes_of(c) if floor(c, s)], PALETTE["floor"],
                  dashed=True)
    with open(path, "w") as f:
        f.write(chart.svg())


def plot_calls(configs, path):
    chart = Chart("Reduce calls per learner, top reduce-scatter step", "learners", "calls",
                  x_format=lambda v: f"{v:g}")
    with_calls = [c for c in configs if c["calls"]]
    chart.add("average", [(learners(c), statistics.mean(c["calls"]["top_rooted"])) for c in with_calls],
              PALETTE["flexreduce"])
    chart.add("maximum", [(learners(c), max(c["calls"]["top_rooted"])) for c in with_calls],
              PALETTE["ring"])
    chart.add("Eq. 12 bound", [(learners(c), max(eq12_bound(c["learners"]))) for c in with_calls],
              PALETTE["mpi"], dashed=True)
    with open(path, "w") as f:
        f.write(chart.svg())


def plot_links(configs, path):
    chart = Chart("Asymmetric links and latency: large size, measured (solid) and predicted",
                  "configuration", "all-reduce time (ms)", x_format=lambda v: configs[int(v)]["id"]
                  if 0 <= int(v) < len(configs) else "", y_format=lambda v: f"{v * 1e3:g}",
                  width=820)
    for a in ALGORITHMS:
        pts, pred = [], []
        for i, c in enumerate(configs):
            if not sizes_of(c):
                continue
            s = max(sizes_of(c))
            p = point(c, a, s)
            if p and p.get("median"):
                pts.append((i, p["median"], p.get("min"), p.get("max")))
            pred.append((i, predicted(c, a, s)))
        chart.add(f"{SHORT[a]} measured", pts, PALETTE[a])
        chart.add(f"{SHORT[a]} predicted", pred, PALETTE[a], dashed=True)
    chart.add("floor", [(i, floor(c, max(sizes_of(c)))) for i, c in enumerate(configs)
                        if sizes_of(c) and floor(c, max(sizes_of(c)))], PALETTE["floor"], dashed=True)
    with open(path, "w") as f:
        f.write(chart.svg())


def plot_links_floor(configs, path):
    """Measured time over the floor per configuration, large size: the 1.2 goal as a line."""
    chart = Chart(f"Asymmetric links: large size, measured time / floor (goal: plan <= {FLOOR_GOAL})",
                  "configuration", "time / floor", x_format=lambda v: configs[int(v)]["id"]
                  if 0 <= int(v) < len(configs) else "", y_format=lambda v: f"{v:g}", width=820)
    for a in ALGORITHMS + ["mpi"]:
        pts = []
        for i, c in enumerate(configs):
            if sizes_of(c):
                s = max(sizes_of(c))
                m, f = median(c, a, s), floor(c, s)
                if m and f:
                    pts.append((i, m / f))
        if pts:
            chart.add(f"{SHORT[a]}", pts, PALETTE[a])
    chart.add(f"goal {FLOOR_GOAL}", [(i, FLOOR_GOAL) for i in range(len(configs))], PALETTE["floor"],
              dashed=True)
    with open(path, "w") as f:
        f.write(chart.svg())


def settings(configs):
    envs = sorted({c["env"] for c in configs if c["measured"]})
    return " / ".join(f"`{e}`" if e else "the defaults" for e in envs) or "the defaults"


def write_report(configs, result_dir, docs, compare=None):
    figures = os.path.join(docs, "results")
    os.makedirs(figures, exist_ok=True)
    paper = [c for c in configs if c["set"] == "paper"]
    links = [c for c in configs if c["set"] == "links"]
    def pair_small(c):  # the small size of the pair; sweeps hold it among theirs
        sizes = sizes_of(c)
        return PAIR_SMALL if PAIR_SMALL in sizes else (min(sizes) if sizes else None)

    def large(c):
        return max(sizes_of(c)) if sizes_of(c) else None
    plots = []
    if paper:
        plot_learners(paper, pair_small, "Fig. 4(a): small message, time against learners",
                      os.path.join(figures, "fig4a-small.svg"))
        plot_learners(paper, large, "Fig. 4(b): large message, time against learners",
                      os.path.join(figures, "fig4b-large.svg"))
        plot_calls(paper, os.path.join(figures, "fig4c-calls.svg"))
        plots += ["fig4a-small.svg", "fig4b-large.svg", "fig4c-calls.svg"]
    sweeps = [c for c in paper if len(sizes_of(c)) > 2]
    link_sweeps = [c for c in links if len(sizes_of(c)) > 2]
    for c in sweeps:
        name = f"fig4-sizes-{learners(c)}.svg"
        plot_sizes(c, os.path.join(figures, name))
        plots.append(name)
    if links:
        plot_links(links, os.path.join(figures, "links.svg"))
        plot_links_floor(links, os.path.join(figures, "links-floor.svg"))
        plots += ["links.svg", "links-floor.svg"]
    for c in link_sweeps:
        name = f"links-sizes-{c['id']}.svg"
        plot_sizes(c, os.path.join(figures, name))
        plots.append(name)

    md = ["# Measured results: FlexReduce on the emulated asymmetric cluster", "",
          "Generated by `bench/cluster/run-experiments.sh` (report: `bench/cluster/report.py`) from "
          f"`{os.path.relpath(result_dir, os.path.dirname(docs)) if result_dir.startswith(os.path.dirname(docs)) else result_dir}`."
          " The testbed, its checks and its calibration are described in [testbed.md](testbed.md).",
          "Times are all-reduce times in milliseconds: the median over the iterations of a point, "
          "with min–max below it; *predicted* is `flexplan predict` on the topology written from "
          "the same run's calibration (link figures only; the runtime's measured cost per hop "
          "is reported beside it). FR = FlexReduce, BLC = BlueConnect, ring = flexplan's ring, "
          "hier = hierarchical, plan = the default plan (no algorithm forced), MPI = Open MPI's "
          "`MPI_Allreduce` on the same processes (timed once per configuration, in the ring's run), "
          "floor = the lower bound of docs/cost-model.md. Every point "
          "was checked (`--check 1`).", "",
          f"Learners ran with {settings(configs)} (UCX_*/FLEXPLAN_* variables set for the run).", "",
          "## Goals", ""] + goals(configs)
    if paper:
        md += ["## Fig. 4 (a)(b): time against learners", "",
               "Links all at the same rate; 2 machines for 4–8 learners, 3 for 9–12, at most one "
               "learner of difference.", "",
               "![Fig. 4(a)](results/fig4a-small.svg)", "", "![Fig. 4(b)](results/fig4b-large.svg)", ""]
        for label, pick in (("small", pair_small), ("large", large)):
            sizes = sorted({pick(c) for c in paper if pick(c)})
            for s in sizes:
                md += table_times([c for c in paper if pick(c) == s], s, f"{label} message: {size_label(s)}")
        md += ["## Fig. 4 (d)(e): time against message size", ""]
        for c in sweeps:
            md += [f"![sizes {learners(c)}](results/fig4-sizes-{learners(c)}.svg)", ""] + table_sweep(c)
        md += ["## Fig. 4 (c): reduce calls per learner", "",
               "Reduce ops of the FlexReduce plan whose result a learner receives in the top "
               "(root-level) reduce-scatter step — the count Eq. 12 bounds — beside the ops it "
               "takes part in and the totals over all reduce-scatter steps.", "",
               "![Fig. 4(c)](results/fig4c-calls.svg)", ""] + table_calls(paper)
    if links:
        md += ["## Second set: asymmetry in the links", "",
               "Equal or unequal learner counts, but machine links of different rates and added "
               "one-way latency (each machine's delay applies to packets leaving and entering it). "
               "*plan* is the plan `flexplan TOPOLOGY -o plan.bin` writes (every algorithm racing, "
               "one schedule per size range); *floor* is the physical lower bound of "
               "docs/cost-model.md on the calibrated topology.",
               "", "![links over the floor](results/links-floor.svg)", "",
               "![links](results/links.svg)", ""]
        for c in link_sweeps:
            md += [f"![sizes {c['id']}](results/links-sizes-{c['id']}.svg)", ""] + table_sweep(c)
        for c in links:
            md += table_times([c], max(sizes_of(c)) if sizes_of(c) else 0,
                              f"{c['id']}: {shape(c)} learners, links {links_text(c)}")
            md += table_times([c], min(sizes_of(c)) if sizes_of(c) else 0,
                              f"{c['id']}: small message")
    if compare:
        others, other_dir = compare
        md += ["## Beside an earlier run", "",
               f"The same configurations measured by another run (`{other_dir}`), with "
               f"{settings(others)}; it may come from another build of flexplan (the "
               "discussion below says which).", ""]
        md += table_compare(configs, others, settings(configs), settings(others))
    md += ["## Measured / predicted, every point", "",
           f"⚠ marks a point more than {RATIO_GOAL * 100:.0f}% from its prediction.", ""]
    md += table_ratios(configs)
    md += ["## Calibration of each configuration", ""] + table_calibration(configs)
    notes = os.path.join(HERE, "results-notes.md")
    if os.path.exists(notes):
        md += [open(notes).read().rstrip(), ""]
    with open(os.path.join(docs, "results.md"), "w") as f:
        f.write("\n".join(md))

    summary = []
    for c in configs:
        summary.append({k: c[k] for k in ("id", "set", "learners", "rates", "delays_us", "skipped",
                                          "load", "calls", "errors", "env", "congestion_control")}
                       | {"measured": {a: {str(s): p for s, p in v.items()} for a, v in c["measured"].items()},
                          "mpi": {str(s): p for s, p in c["mpi"].items()},
                          "predicted": {a: {str(s): t for s, t in v.items()} for a, v in c["predicted"].items()},
                          "floor": {str(s): t for s, t in c["floor"].items()},
                          "chosen": {str(s): t for s, t in c["chosen"].items()},
                          "calibration": c["calibration"]})
    with open(os.path.join(figures, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return plots


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="run-experiments.sh's result directory")
    parser.add_argument("--docs", default=os.path.join(HERE, "..", "..", "docs"))
    parser.add_argument("--compare", help="a second result directory to set beside this one")
    args = parser.parse_args()
    if not os.path.isdir(args.results):
        print(f"report.py: no result directory {args.results}", file=sys.stderr)
        return 2
    configs = load_results(args.results)
    if not configs:
        print(f"report.py: {args.results} holds no configuration", file=sys.stderr)
        return 2
    compare = None
    if args.compare:
        if not os.path.isdir(args.compare):
            print(f"report.py: no result directory {args.compare}", file=sys.stderr)
            return 2
        compare = (load_results(args.compare), args.compare)
    plots = write_report(configs, os.path.abspath(args.results), os.path.abspath(args.docs), compare)
    print(f"report.py: {len(configs)} configurations -> {args.docs}/results.md, "
          f"{len(plots)} plots in {args.docs}/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
