#!/usr/bin/env python3
"""Turn raw bench output into benches/results/*.json, a Markdown table on
stdout and (observe-cost) an SVG plot written without any plotting library.

    report.py observe-cost <observe-cost.jsonl> <results dir>
    report.py micro <criterion dir> <results dir> [load average]
    report.py outcome <outcome.jsonl> <results dir> [name] [bench policy file]
"""
import datetime
import glob
import json
import os
import platform
import re
import subprocess
import sys


def meta():
    def sh(*c):
        try:
            return subprocess.run(c, capture_output=True, text=True, check=True).stdout.strip()
        except Exception:
            return None
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "git": sh("git", "rev-parse", "--short", "HEAD"),
        "git_dirty": bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
        "host_kernel": platform.release(),
        "host_cpu": cpu,
        "host_cpus": os.cpu_count(),
        "host_loadavg": open("/proc/loadavg").read().split()[:3],
    }


def write(res_dir, name, obj):
    os.makedirs(res_dir, exist_ok=True)
    p = os.path.join(res_dir, name)
    with open(p, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"wrote {p}", file=sys.stderr)


# ------------------------------------------------------------------ SVG
def write_svg(path, out):
    """Close the <svg> element of `out` (lines) and write it to `path`."""
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}", file=sys.stderr)


def svg_plot(panels, path, title, xlabel="page pools", xticks=True):
    """panels: [(panel title, y label, {series: [(x, y)]})]; linear axes."""
    W, H, M = 460, 320, 60
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W * len(panels)}" height="{H + 30}" '
           'font-family="sans-serif" font-size="11">',
           f'<text x="10" y="16" font-size="13" font-weight="bold">{title}</text>']
    for i, (ptitle, ylabel, series) in enumerate(panels):
        ox = i * W
        pts = [p for s in series.values() for p in s]
        if not pts:
            continue
        xmax = max(x for x, _ in pts) * 1.05
        ymax = max(y for _, y in pts) * 1.1 or 1
        def X(x):
            return ox + M + (W - M - 20) * x / xmax
        def Y(y):
            return 30 + (H - 50) * (1 - y / ymax)
        out.append(f'<text x="{ox + M}" y="40" font-weight="bold">{ptitle}</text>')
        out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(xmax)}" y2="{Y(0)}" stroke="black"/>')
        out.append(f'<line x1="{X(0)}" y1="{Y(0)}" x2="{X(0)}" y2="{Y(ymax)}" stroke="black"/>')
        for k in range(6):
            yv = ymax * k / 5
            out.append(f'<text x="{X(0) - 5}" y="{Y(yv) + 4}" text-anchor="end">{yv:.3g}</text>')
            out.append(f'<line x1="{X(0)}" y1="{Y(yv)}" x2="{X(xmax)}" y2="{Y(yv)}" stroke="#ddd"/>')
        xs = sorted({x for x, _ in pts}) if xticks else [round(xmax * k / 5) for k in range(6)]
        for xv in xs:
            out.append(f'<text x="{X(xv)}" y="{Y(0) + 14}" text-anchor="middle">{xv:g}</text>')
        out.append(f'<text x="{X(xmax / 2)}" y="{H + 2}" text-anchor="middle">{xlabel}</text>')
        out.append(f'<text x="{ox + 12}" y="{Y(ymax / 2)}" transform="rotate(-90 {ox + 12} {Y(ymax / 2)})" '
                   f'text-anchor="middle">{ylabel}</text>')
        for j, (name, s) in enumerate(series.items()):
            c = colors[j % len(colors)]
            s = sorted(s)
            path_d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in s)
            out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{path_d}"/>')
            for x, y in s:
                out.append(f'<circle cx="{X(x):.1f}" cy="{Y(y):.1f}" r="3" fill="{c}"/>')
            out.append(f'<rect x="{X(0) + 10}" y="{50 + 14 * j}" width="10" height="10" fill="{c}"/>')
            out.append(f'<text x="{X(0) + 24}" y="{59 + 14 * j}">{name}</text>')
    write_svg(path, out)


# ------------------------------------------------------------------ observe-cost
def within_rounds(groups, num, den):
    """The CPU-per-pass ratio num/den within each round, sorted, as
    [(ratio, round)]: `groups` maps a round to its rows by name; rounds
    lacking either are left out. The pass/floor and A/B rows alternate
    within rounds, so a ratio is never taken across two rounds."""
    return sorted((g[num]["cpu_us_per_pass"] / g[den]["cpu_us_per_pass"], k)
                  for k, g in groups.items() if num in g and den in g)


def observe_cost(jsonl, res_dir):
    rows = [json.loads(l) for l in open(jsonl) if l.strip().startswith("{")]
    errors = [r for r in rows if "error" in r]
    by, rounds = {}, {}
    # The VM's own line (observe-cost.sh): its kernel, vCPUs and clock.
    vm = next((r for r in rows if r.get("tool") == "vm"), {})
    rows = [r for r in rows if r.get("tool") != "vm"]
    for r in rows:
        by.setdefault(r["tool"], {})[r["pools"]] = r
        if "round" in r:
            rounds.setdefault((r["pools"], r["round"]), {})[r["tool"]] = r
    base = by.get("baseline", {}).get(0, {})
    sizes = sorted(by.get("pptune-pass", {}))
    summary = []
    for n in sizes:
        # Pass and floor alternate over rounds (observe-cost.sh): the
        # ratio is taken within each round, and the row gives the median
        # round's figures and the spread of the ratios.
        within = within_rounds({k: g for (pools, k), g in rounds.items() if pools == n},
                               "pptune-pass", "raw-floor")
        if within:
            _, mid = within[len(within) // 2]
            p, f = rounds[(n, mid)]["pptune-pass"], rounds[(n, mid)]["raw-floor"]
            ratios = [round(x, 3) for x, _ in within]
        else:
            p = by["pptune-pass"][n]
            f = by.get("raw-floor", {}).get(n, {})
            ratios = []
        # Allocations and peak RSS: the worst round, not the median one.
        passes = [g["pptune-pass"] for (pools, _), g in rounds.items()
                  if pools == n and "pptune-pass" in g] or [p]
        s = by.get("pptune-status", {}).get(n, {})
        y = by.get("ynl-cli", {}).get(n, {})
        t = by.get("ynltool", {}).get(n, {})
        e = by.get("pptune-encode", {}).get(n, {})
        # Unrounded: the targets below are judged on these (rounded to two
        # places, 1.5049 passed "<= 1.5"); the table prints three places.
        def ratio(a, b):
            return a / b if a and b else None
        summary.append({
            "pools": n,
            "devices": p.get("devices"),
            "pass_cpu_us": p["cpu_us_per_pass"],
            "pass_wall_us": p["wall_us_per_pass"],
            "pass_allocs": max(x["allocs_per_pass"] for x in passes),
            "pass_alloc_bytes": max(x["alloc_bytes_per_pass"] for x in passes),
            "pass_maxrss_kib": max(x["maxrss_kib"] for x in passes),
            "rounds": len(ratios),
            "pass_over_floor_cpu_by_round": ratios,
            "encode_cpu_us": e.get("cpu_us_per_pass"),
            "floor_cpu_us": f.get("cpu_us_per_pass"),
            "floor_wall_us": f.get("wall_us_per_pass"),
            "floor_allocs": f.get("allocs_per_pass"),
            "floor_maxrss_kib": f.get("maxrss_kib"),
            "pass_over_floor_cpu": ratio(p["cpu_us_per_pass"], f.get("cpu_us_per_pass")),
            "pass_over_floor_wall": ratio(p["wall_us_per_pass"], f.get("wall_us_per_pass")),
            "status_cpu_ms": s.get("cpu_ms_per_run"),
            "status_wall_ms": s.get("wall_ms_per_run"),
            "status_maxrss_kib": s.get("maxrss_kib"),
            "ynltool_cpu_ms": t.get("cpu_ms_per_run"),
            "ynltool_maxrss_kib": t.get("maxrss_kib"),
            "ynl_cli_cpu_ms": y.get("cpu_ms_per_run"),
            "ynl_cli_wall_ms": y.get("wall_ms_per_run"),
            "ynl_cli_maxrss_kib": y.get("maxrss_kib"),
            "ynl_cli_over_status_cpu": ratio(y.get("cpu_ms_per_run"), s.get("cpu_ms_per_run")),
            "status_over_ynltool_cpu": ratio(s.get("cpu_ms_per_run"), t.get("cpu_ms_per_run")),
        })
    top = summary[-1] if summary else {}
    # Issue 16's targets: the ratios at 512 and 2048 pools, allocations at
    # every size, RSS at the largest.
    big = [r for r in summary if r["pools"] >= 512]
    def every(rows, ok):
        return bool(rows) and all(ok(r) for r in rows)
    targets = {
        "pass_le_1.5x_floor_at_512_2048": every(big, lambda r: (r["pass_over_floor_cpu"] or 99) <= 1.5),
        "allocs_le_100_per_pass": every(summary, lambda r: r["pass_allocs"] <= 100),
        "pass_peak_rss_le_12MiB": top.get("pass_maxrss_kib") is not None and top["pass_maxrss_kib"] <= 12 * 1024,
        "status_le_1.2x_ynltool_at_512_2048": every(big, lambda r: (r["status_over_ynltool_cpu"] or 99) <= 1.2),
        "status_50x_cheaper_than_ynl_cli": every(big, lambda r: (r["ynl_cli_over_status_cpu"] or 0) >= 50),
        "at_pools": top.get("pools"),
    }
    # The daemon as shipped at the largest size, and the emulation's
    # inflation of userspace work (the same micro-bench, VM over host).
    d = next(iter(by.get("daemon-cpu", {}).values()), None)
    ev = next(iter(by.get("emulation-vm", {}).values()), None)
    eh = next(iter(by.get("emulation-host", {}).values()), None)
    if d:
        targets["daemon_cpu_share_pct_vm"] = d["share_pct"]
        targets["daemon_pools"] = d["pools"]
        targets["daemon_maxrss_kib"] = d["maxrss_kib"]
        if ev and eh and eh["cpu_us_per_pass"]:
            inflation = ev["cpu_us_per_pass"] / eh["cpu_us_per_pass"]
            targets["emulation_inflation"] = round(inflation, 1)
            targets["daemon_cpu_share_pct_native_est"] = round(d["share_pct"] / inflation, 4)
            targets["daemon_le_0.1pct_native_est"] = d["share_pct"] / inflation <= 0.1
        targets["daemon_le_0.1pct_vm"] = d["share_pct"] <= 0.1
    # Linearity: per-pool cost between the two largest sizes vs the largest.
    if len(summary) >= 3:
        a, b = summary[-2], summary[-1]
        slope = (b["pass_cpu_us"] - a["pass_cpu_us"]) / (b["pools"] - a["pools"])
        targets["pass_cpu_us_per_extra_pool"] = round(slope, 2)
        per_pool = [round(r["pass_cpu_us"] / r["pools"], 2) for r in summary]
        targets["pass_cpu_us_per_pool_by_size"] = per_pool
    clock = ("-icount shift=0: guest CPU times are instruction counts, 1 ns per instruction"
             if vm.get("clock") == "icount" else "TCG's host-timed clock")
    res = {"meta": meta(),
           "vm": f"qemu TCG (emulated), kernel {vm.get('kernel', '7.3')}, {vm.get('vcpus', 1)} vCPU, 2048 MiB, {clock}; "
                 "ratios from one run, pass and floor alternating over rounds",
           "clock": vm.get("clock", "tcg"),
           "baseline_process": base, "summary": summary, "targets": targets,
           "errors": errors, "rows": rows}
    write(res_dir, "observe-cost.json", res)
    hdr = ("| pools | pass CPU µs | floor CPU µs | pass/floor (min–max) | pass allocs | pass RSS KiB | encode CPU µs "
           "| status CPU ms | status RSS KiB | ynltool CPU ms | status/ynltool | ynl CLI CPU ms | ynl/status |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    def f3(x):
        return "–" if x is None else f"{x:.3f}"
    for r in summary:
        by_round = r["pass_over_floor_cpu_by_round"]
        span = f" ({min(by_round):.3f}–{max(by_round):.3f})" if by_round else ""
        print(f"| {r['pools']} | {r['pass_cpu_us']:.0f} | {r['floor_cpu_us'] or 0:.0f} | {f3(r['pass_over_floor_cpu'])}{span} "
              f"| {r['pass_allocs']:.0f} | {r['pass_maxrss_kib']} | {r['encode_cpu_us']} "
              f"| {r['status_cpu_ms']} | {r['status_maxrss_kib']} "
              f"| {r['ynltool_cpu_ms']} | {f3(r['status_over_ynltool_cpu'])} | {r['ynl_cli_cpu_ms']} | {f3(r['ynl_cli_over_status_cpu'])} |")
    print(json.dumps(targets))
    if errors:
        print("ERRORS:", json.dumps(errors))
    svg_plot([
        ("in-process, per pass", "CPU µs per pass", {
            "pptune pass": [(r["pools"], r["pass_cpu_us"]) for r in summary],
            "raw netlink floor": [(r["pools"], r["floor_cpu_us"]) for r in summary if r["floor_cpu_us"]],
        }),
        ("whole process, per run", "CPU ms per run", {
            "pptune status --json": [(r["pools"], r["status_cpu_ms"]) for r in summary if r["status_cpu_ms"]],
            "ynltool page-pool stats": [(r["pools"], r["ynltool_cpu_ms"]) for r in summary if r["ynltool_cpu_ms"]],
            "ynl CLI (pyynl)": [(r["pools"], r["ynl_cli_cpu_ms"]) for r in summary if r["ynl_cli_cpu_ms"]],
        }),
    ], os.path.join(res_dir, "observe-cost.svg"), "Cost of one observe pass vs page pools (VM, TCG"
             + (", -icount: instructions at 1 ns" if vm.get("clock") == "icount" else "") + ")")
    return 1 if errors else 0


# ------------------------------------------------------------------ criterion
def micro(crit_dir, res_dir, load=None):
    out = []
    for est in sorted(glob.glob(os.path.join(crit_dir, "**", "new", "estimates.json"), recursive=True)):
        d = os.path.dirname(est)
        try:
            bm = json.load(open(os.path.join(d, "benchmark.json")))
        except OSError:
            continue
        e = json.load(open(est))
        out.append({
            "id": bm.get("full_id") or bm.get("title"),
            "throughput": bm.get("throughput"),
            "mean_ms": round(e["mean"]["point_estimate"] / 1e6, 3),
            "median_ms": round(e["median"]["point_estimate"] / 1e6, 3),
            "mean_ci95_ms": [round(e["mean"]["confidence_interval"]["lower_bound"] / 1e6, 3),
                             round(e["mean"]["confidence_interval"]["upper_bound"] / 1e6, 3)],
        })
    m = meta()
    if load:
        m["loadavg_during_run"] = load
    write(res_dir, "micro.json", {"meta": m, "benches": out,
                                  "note": "criterion --quick on a shared, loaded 2-core host: wall time"})
    print("| bench | median ms | mean ms (95% CI) |\n|---|---|---|")
    for b in out:
        print(f"| {b['id']} | {b['median_ms']} | {b['mean_ms']} ({b['mean_ci95_ms'][0]}–{b['mean_ci95_ms'][1]}) |")
    return 0 if out else 1


# ------------------------------------------------------------------ outcome
def policy_period_s(path):
    """One (cooldown + evaluation) period of the bench policy, in seconds."""
    secs = {}
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for line in open(path):
        m = re.match(r"\s*(cooldown|evaluation):\s*(\d+)(ms|s|m|h)\s*$", line)
        if m:
            secs[m.group(1)] = int(m.group(2)) * units[m.group(3)]
    return secs["cooldown"] + secs["evaluation"]


def fig(r):
    """The figure targets are judged on: ppsim's modelled goodput (runs
    before it existed: the wall figure)."""
    return r.get("modelled_pps", r.get("goodput_pps", 0))


def cap(r):
    """The figure the best static ring is picked on: ppsim's modelled
    capacity, the modelled goodput without the arrival rate's bound (the
    inverse of the modelled CPU cost per page). Equal to the modelled
    goodput when the rate is unlimited; with a fixed arrival rate every ring
    whose capacity exceeds it delivers that rate, so goodput cannot rank
    the rings, and the drops of the rings below it follow the emulated
    CPU's speed, not the model. Runs before it existed: the figure."""
    return r.get("capacity_pps", fig(r))


def static_points(rows):
    """Per (workload, preset): {(ring, queues): [static rows, one per
    round]} (one queue count except on the queue workloads)."""
    out = {}
    for r in rows:
        if r.get("kind") == "static":
            pt = (r["ring_final"], r.get("queues", 0))
            out.setdefault((r["workload"], r.get("preset")), {}).setdefault(pt, []).append(r)
    return out


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def spread(xs):
    """(max - min) / mean of repeated readings at one ring."""
    m = mean(xs)
    return (max(xs) - min(xs)) / m if len(xs) > 1 and m > 0 else None


def rank_agreement(pts):
    """Spearman correlation between the modelled and the wall means over the
    rings of one sweep (1 = same order)."""
    rings = sorted(pts)
    if len(rings) < 3:
        return None
    def ranks(vals):
        order = sorted(range(len(vals)), key=lambda i: vals[i])
        rk = [0.0] * len(vals)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and vals[order[j + 1]] == vals[order[i]]:
                j += 1
            for k in range(i, j + 1):
                rk[order[k]] = (i + j) / 2
            i = j + 1
        return rk
    a = ranks([mean([fig(p) for p in pts[r]]) for r in rings])
    b = ranks([mean([p.get("goodput_pps", 0) for p in pts[r]]) for r in rings])
    ma, mb = mean(a), mean(b)
    num = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    den = (sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b)) ** 0.5
    return round(num / den, 3) if den else None


def best_static(rows):
    """Per (workload, preset), from its interleaved, repeated sweep: the
    mean of each (ring, queues) point's rounds; best static = the smallest
    ring (then the fewest queues) whose mean modelled capacity (`cap`) is
    within 5 % of the sweep's best (the outcome target's own tolerance).
    Its goodput reference is the sweep's best mean modelled goodput. Also
    the default (256) and maximum rings' means at the runs' starting queue
    count (the most swept). Returns {(workload, preset): {"default"|"max"|
    "best-static": row}} with the per-ring spread and the modelled/wall rank
    agreement."""
    out = {}
    for key, pts in static_points(rows).items():
        means = {}
        for ring, rs in pts.items():
            m = dict(rs[0])
            m["modelled_pps"] = mean([fig(p) for p in rs])
            m["capacity_pps"] = mean([cap(p) for p in rs])
            m["goodput_pps"] = mean([p.get("goodput_pps", 0) for p in rs])
            m["dropped_pps"] = mean([p.get("dropped_pps", 0) for p in rs])
            m["inflight_mem"] = max(p.get("inflight_mem", 0) for p in rs)
            m["rounds"] = len(rs)
            m["modelled_spread"] = spread([fig(p) for p in rs])
            m["capacity_spread"] = spread([cap(p) for p in rs])
            m["wall_spread"] = spread([p.get("goodput_pps", 0) for p in rs])
            means[ring] = m
        top = max(m["modelled_pps"] for m in means.values())
        top_cap = max(m["capacity_pps"] for m in means.values())
        near = [m for m in means.values() if m["capacity_pps"] >= 0.95 * top_cap]
        pick = min(near, key=lambda m: (m["ring_final"], m.get("queues", 0)))
        start_q = max(q for _, q in means)
        rings = [r for r, q in means if q == start_q]
        out[key] = {
            "default": dict(means[(min(rings), start_q)], kind="static-mean", config="default"),
            "max": dict(means[(max(rings), start_q)], kind="static-mean", config="max"),
            "best-static": dict(pick, kind="best_static", config="best-static", modelled_pps=top,
                                ring_modelled_pps=pick["modelled_pps"]),
            "sweep": [dict(m, kind="static-mean") for _, m in sorted(means.items())],
            "rank_agreement": rank_agreement(pts),
        }
    return out


def changes_in(tl):
    return sum(1 for a, b in zip(tl, tl[1:]) if b[1] != a[1])


def queues_of(p):
    """The queue count of a timeline point (runs before the queue
    workloads logged none)."""
    return p[4] if len(p) > 4 else None


def verdicts(rows, stat, period_s):
    """The issue's targets per (workload, preset), decided on the modelled
    figure. A key is absent where the target does not apply."""
    runs = {}
    for r in rows:
        if r.get("kind") in ("pptune", "naive"):
            runs.setdefault((r["workload"], r.get("preset")), {})[r["kind"]] = r
    out = []
    for key, st in stat.items():
        rr = runs.get(key, {})
        pp, nv = rr.get("pptune"), rr.get("naive")
        if not pp:
            continue
        best, mx = st["best-static"], st["max"]
        b = best["ring_final"]
        v = {"workload": key[0], "preset": key[1], "best_static_ring": b,
             "pptune_ring": pp["ring_final"], "pptune_changes": pp.get("changes"),
             "naive_ring": nv and nv["ring_final"], "naive_changes": nv and nv.get("changes")}
        if best["modelled_pps"] > 0:
            v["goodput_vs_best"] = round(fig(pp) / best["modelled_pps"], 3)
            v["goodput_ok"] = v["goodput_vs_best"] >= 0.95
            if nv:
                v["naive_goodput_vs_best"] = round(fig(nv) / best["modelled_pps"], 3)
        tunable = b > st["default"]["ring_final"]
        # The queue case: a best pair at another queue count than the start
        # is something to tune too (pptune's trial queue cuts), not "nothing
        # to tune"; the ring's own targets still apply (held pages: no growth).
        queues_tunable = bool(pp.get("queue_case")) and best.get("queues") != pp.get("start_queues")
        if tunable:
            v["within_pow2"] = b / 2 <= pp["ring_final"] <= 2 * b
            v["changes_ok"] = (pp.get("changes") or 0) <= 2
            if nv:
                v["fewer_changes_than_naive_ok"] = (
                    (pp.get("changes") or 0) < (nv.get("changes") or 0)
                    and fig(pp) >= 0.98 * fig(nv))
        elif not queues_tunable:
            v["no_change_ok"] = (pp.get("changes") or 0) == 0
        if pp.get("stack_ref_pct"):
            # Held pages: the slow path is not the ring's; it must not grow.
            v["no_growth_ok"] = max([pp["ring_final"]] + [p[1] for p in pp.get("timeline") or []]) \
                <= st["default"]["ring_final"]
        if pp.get("queue_case"):
            tl = pp.get("timeline") or []
            v["best_static_queues"] = best.get("queues")
            v["pptune_queues"] = pp.get("queues")
            v["start_queues"] = pp.get("start_queues")
            # Rings first: no queue change before the ring's last change.
            ring_t = [b_[0] for a, b_ in zip(tl, tl[1:]) if b_[1] != a[1]]
            q_t = [b_[0] for a, b_ in zip(tl, tl[1:]) if queues_of(b_) != queues_of(a)]
            v["rings_first_ok"] = not q_t or not ring_t or min(q_t) > max(ring_t)
            # Fewer queues only when the ring cannot help: with the starting
            # queue count, does some ring reach the best pair's goodput
            # (within 5 %)? Then a queue cut was not needed; if none does,
            # fewer queues are needed and staying is the miss.
            sq = pp.get("start_queues")
            ring_helps = any(m["modelled_pps"] >= 0.95 * best["modelled_pps"]
                             for m in st["sweep"] if m.get("queues") == sq)
            cut = (pp.get("queues") or 0) < (sq or 0)
            v["ring_can_help"] = ring_helps
            v["fewer_queues_only_when_needed_ok"] = cut != ring_helps if cut else ring_helps
        if b <= mx["ring_final"] / 4:
            v["not_at_limit_ok"] = pp["ring_final"] < mx["ring_final"]
        if b < mx["ring_final"] and mx.get("inflight_mem", 0) > 0:
            v["mem_vs_max"] = round(pp.get("inflight_mem", 0) / mx["inflight_mem"], 3)
            v["mem_ok"] = v["mem_vs_max"] <= 0.5
        # Changes after the ring first reached its final value's power of
        # two, over the rest of the run (settling).
        tl = pp.get("timeline") or []
        last = max((t for (a, (t, ring, *_)) in zip(tl, tl[1:]) if ring != a[1]), default=None)
        # How long the run was watched (runs ended by --quiet-secs: less
        # than enforce_secs).
        watched = pp.get("daemon_run_s") or pp.get("enforce_secs") or 0
        v["watched_after_last_change_s"] = round(watched - (last or 0), 1)
        # The static windows' repeatability in this run: the largest spread
        # of the modelled figure between rounds at one sweep point
        # (benches/results/outcome-model.md §3.1's bound for a decidable 5 %
        # target: 2 %).
        # The points that decide: the goodput reference (the sweep's best
        # modelled goodput) and the ring reference (capacity at the picked
        # ring and at the sweep's best capacity); a rate-limited workload's
        # lossy small rings spread more and decide nothing.
        sp = [m["modelled_spread"] for m in st["sweep"] if m.get("modelled_spread") is not None]
        if sp:
            top = max(st["sweep"], key=lambda m: m["modelled_pps"])
            top_cap = max(st["sweep"], key=lambda m: m.get("capacity_pps", 0))
            deciding = [x for x in (top.get("modelled_spread"), best.get("capacity_spread"),
                                    top_cap.get("capacity_spread")) if x is not None]
            v["sweep_spread_max"] = round(max(sp), 4)
            v["best_spread"] = round(max(deciding), 4) if deciding else None
            v["best_spread_ok"] = bool(deciding) and max(deciding) <= 0.02
        out.append(v)
    return out


def svg_convergence(runs, stat, path, title):
    """Rings on a log2 axis (power-of-two ticks) and modelled goodput as a
    fraction of each workload's best static, per second, pptune (solid)
    beside the naive tuner (dotted); each workload's best static ring as a
    dashed line in its colour."""
    import math
    W, H, ML, MR, MT, MB = 520, 360, 78, 16, 50, 46
    # Ten colours: one per workload of a part (nine in the presets' parts).
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
              "#7f7f7f", "#bcbd22"]
    wls = sorted({r["workload"] for r in runs}, key=lambda w: (len(w), w))
    col = {w: colors[i % len(colors)] for i, w in enumerate(wls)}
    tmax = max((p[0] for r in runs for p in r.get("timeline") or []), default=1) or 1
    # Time ticks at a round step, at most six.
    tstep = next((s_ for s_ in (5, 10, 15, 20, 30, 60, 120, 300, 600) if tmax / s_ <= 6), 1200)
    rows = (len(wls) + 3) // 4
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 20 * rows + 36}" '
           'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="18" font-size="13" font-weight="bold">{title}</text>']
    def panel(ox, ptitle, ylab, ys, yfmt, ymin, ymax, logy, series, refs):
        def X(t):
            return ox + ML + (W - ML - MR) * t / tmax
        def Y(y):
            if logy:
                y = math.log2(max(y, 1))
                return MT + (H - MT - MB) * (1 - (y - ymin) / (ymax - ymin))
            return MT + (H - MT - MB) * (1 - (y - ymin) / (ymax - ymin))
        out.append(f'<text x="{ox + ML}" y="{MT - 12}" font-weight="bold">{ptitle}</text>')
        out.append(f'<line x1="{X(0)}" y1="{H - MB}" x2="{X(tmax)}" y2="{H - MB}" stroke="black"/>')
        out.append(f'<line x1="{X(0)}" y1="{H - MB}" x2="{X(0)}" y2="{MT}" stroke="black"/>')
        for yv in ys:
            out.append(f'<line x1="{X(0)}" y1="{Y(yv):.1f}" x2="{X(tmax)}" y2="{Y(yv):.1f}" stroke="#e4e4e4"/>')
            out.append(f'<text x="{X(0) - 5}" y="{Y(yv) + 4:.1f}" text-anchor="end">{yfmt(yv)}</text>')
        for k in range(int(tmax // tstep) + 1):
            tv = k * tstep
            out.append(f'<line x1="{X(tv):.1f}" y1="{H - MB}" x2="{X(tv):.1f}" y2="{H - MB + 4}" stroke="black"/>')
            out.append(f'<text x="{X(tv):.1f}" y="{H - MB + 15}" text-anchor="middle">{tv}</text>')
        out.append(f'<text x="{X(tmax / 2):.1f}" y="{H - 12}" text-anchor="middle">seconds since start (ring 256)</text>')
        out.append(f'<text transform="translate({ox + 14},{(MT + H - MB) / 2}) rotate(-90)" text-anchor="middle">{ylab}</text>')
        for w, y in refs:
            out.append(f'<line x1="{X(0)}" y1="{Y(y):.1f}" x2="{X(tmax)}" y2="{Y(y):.1f}" stroke="{col[w]}" '
                       'stroke-dasharray="6 4" stroke-width="1"/>')
        for w, dash, pts in series:
            if pts:
                d = " ".join(f"{X(t):.1f},{Y(y):.1f}" for t, y in pts)
                style = 'stroke-dasharray="2 3" stroke-width="1.2"' if dash else 'stroke-width="2"'
                out.append(f'<polyline fill="none" stroke="{col[w]}" {style} points="{d}"/>')
    rings = [p[1] for r in runs for p in r.get("timeline") or []] + [s["best-static"]["ring_final"] for s in stat.values()]
    lo = math.floor(math.log2(max(min(rings, default=256), 1)))
    hi = math.ceil(math.log2(max(rings, default=16384)))
    ser, ref, gser = [], [], []
    for r in runs:
        w = r["workload"]
        st = stat.get((w, r.get("preset")))
        tl = r.get("timeline") or []
        ser.append((w, r["kind"] == "naive", [(p[0], p[1]) for p in tl]))
        if st:
            if r["kind"] == "pptune":
                ref.append((w, st["best-static"]["ring_final"]))
            bm = st["best-static"]["modelled_pps"] or 1
            gser.append((w, r["kind"] == "naive", [(p[0], (p[3] if len(p) > 3 else p[2]) / bm) for p in tl]))
    panel(0, "RX ring (log2 axis)", "RX ring entries", [2 ** k for k in range(lo, hi + 1)],
          lambda v: f"{int(v)}", lo, hi, True, ser, ref)
    gmax = max([1.1] + [y for _, _, pts in gser for _, y in pts])
    panel(W, "modelled goodput / best static", "fraction of best static goodput",
          [k / 5 for k in range(int(gmax * 5) + 1)], lambda v: f"{v:.1f}", 0, gmax, False, gser, [])
    y0 = H + 8
    for i, w in enumerate(wls):
        x, y = 10 + (i % 4) * 250, y0 + 20 * (i // 4)
        out.append(f'<line x1="{x}" y1="{y}" x2="{x + 24}" y2="{y}" stroke="{col[w]}" stroke-width="2"/>')
        out.append(f'<text x="{x + 30}" y="{y + 4}">{w}</text>')
    out.append(f'<text x="10" y="{y0 + 20 * rows + 4}">solid: pptune · dotted: naive tuner (+25 %/window) · dashed: best static ring</text>')
    write_svg(path, out)
    try:
        import cairosvg
    except ImportError:
        sys.exit("report.py: the PNG needs cairosvg (python3 -m pip install cairosvg); the SVG is written")
    png = path[:-4] + ".png"
    cairosvg.svg2png(url=path, write_to=png)
    print(f"wrote {png}", file=sys.stderr)


def preset_table(stat, runs):
    """One table for the whole preset (benches/results/outcome-model.md
    §3.2's form): per workload the default, max and best static rings, the
    naive tuner and pptune; ring with the queue count on the queue
    workloads."""
    print("\n| workload | config | ring | modelled pps | / best | wall pps | ring_full share | pool MiB | changes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (wl, preset), st in stat.items():
        best = st["best-static"]["modelled_pps"] or 1
        show = [("default", st["default"]), ("max", st["max"]), ("best static", st["best-static"]),
                ("naive tuner", runs.get((wl, preset, "naive"))), ("**pptune**", runs.get((wl, preset, "pptune")))]
        first = True
        for label, r in show:
            if not r:
                continue
            ring = r["ring_final"]
            if r.get("queue_case"):
                ring = f"({ring}, {r.get('queues')})"
            val = fig(r) if label != "best static" else r["ring_modelled_pps"]
            ch = r.get("changes")
            if ch is None:
                ch = "–"
            elif ch:
                ch = f"{ch} ({r.get('converge_s')} s)" if label == "**pptune**" else str(ch)
            print(f"| {wl if first else ''} | {label} | {ring} | {val:,.0f} | {val / best:.3f} | "
                  f"{r.get('goodput_pps', 0):,.0f} | {r.get('ring_full_share', 0):.3f} | "
                  f"{r.get('inflight_mem', 0) / 2**20:.1f} | {ch} |")
            first = False


def outcome(jsonl, res_dir, name="outcome", policy=None):
    rows = [json.loads(l) for l in open(jsonl) if l.strip().startswith("{")]
    rows = [r for r in rows if r.get("kind") not in ("best_static", "static-mean")]
    stat = best_static(rows)
    period = policy_period_s(policy) if policy else None
    ver = verdicts(rows, stat, period)
    write(res_dir, f"{name}.json", {
        "meta": meta(),
        "vm": "qemu TCG (emulated), kernel 7.3, 2048 MiB; goodput in pages/s delivered by ppsim; "
              "modelled_pps = ppsim's modelled goodput (tests/ppsim/README.md), the figure targets are judged on",
        "period_s": period,
        "verdicts": ver,
        "static": [dict(workload=k[0], preset=k[1], rank_agreement=v["rank_agreement"], sweep=v["sweep"],
                        best_static_ring=v["best-static"]["ring_final"]) for k, v in stat.items()],
        "rows": rows})
    runs = {}
    for r in rows:
        if r.get("kind") in ("pptune", "naive"):
            runs[(r["workload"], r.get("preset"), r["kind"])] = r
    for (wl, preset), st in stat.items():
        sp = [m["modelled_spread"] for m in st["sweep"] if m.get("modelled_spread") is not None]
        print(f"\n{wl} ({preset}); modelled/wall rank agreement over the sweep: {st['rank_agreement']}; "
              f"modelled spread between rounds, largest over the sweep: "
              f"{f'{max(sp):.2%}' if sp else '–'}\n")
        print("| config | ring | queues | modelled pps | / best | wall pps | ring_full share | inflight MiB | changes |")
        print("|---|---|---|---|---|---|---|---|---|")
        best = st["best-static"]["modelled_pps"] or 1
        show = [("default", st["default"]), ("max", st["max"]), ("best static", st["best-static"]),
                ("naive tuner", runs.get((wl, preset, "naive"))), ("pptune", runs.get((wl, preset, "pptune")))]
        for label, r in show:
            if not r:
                continue
            ring = r["ring_final"]
            if label == "best static":
                val = f"{r['ring_modelled_pps']:,.0f} (sweep best {r['modelled_pps']:,.0f})"
                ratio = r["ring_modelled_pps"] / best
            else:
                val = f"{fig(r):,.0f}"
                ratio = fig(r) / best
            print(f"| {label} | {ring} | {r.get('queues', '–')} | {val} | {ratio:.3f} | {r.get('goodput_pps', 0):,.0f} "
                  f"| {r.get('ring_full_share', 0):.3f} | {r.get('inflight_mem', 0) / 2**20:.1f} | {r.get('changes', '–')} |")
    preset_table(stat, runs)
    if ver:
        def yn(v, k):
            if k not in v:
                return "–"
            x = v[k]
            return "✓" if x is True else "✗" if x is False else str(x)
        print()
        print("| workload | preset | best static | pptune ring (changes) | naive ring (changes) | goodput / best | ≥ 0.95 | within 2× of best | never the limit (best ≤ limit/4) | ≤ 2 changes | memory / max | ≤ 0.5 | fewer changes than naive, ≥ its goodput | no change where nothing to tune | held pages: no growth | rounds' spread at the deciding points (≤ 2 %) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for v in ver:
            print(f"| {v['workload']} | {v['preset']} | {v['best_static_ring']} | {v['pptune_ring']} ({v['pptune_changes']}) "
                  f"| {v['naive_ring']} ({v['naive_changes']}) | {yn(v, 'goodput_vs_best')} | {yn(v, 'goodput_ok')} "
                  f"| {yn(v, 'within_pow2')} | {yn(v, 'not_at_limit_ok')} | {yn(v, 'changes_ok')} | {yn(v, 'mem_vs_max')} "
                  f"| {yn(v, 'mem_ok')} | {yn(v, 'fewer_changes_than_naive_ok')} | {yn(v, 'no_change_ok')} | {yn(v, 'no_growth_ok')} "
                  f"| {yn(v, 'best_spread')} {yn(v, 'best_spread_ok')} |")
        qv = [v for v in ver if "rings_first_ok" in v]
        if qv:
            print()
            print("| workload | best static (ring, queues) | a ring helps at the start count | pptune from (256, start) to (ring, queues) | goodput / best | ≥ 0.95 | rings first | fewer queues only when the ring cannot help (and then fewer) |")
            print("|---|---|---|---|---|---|---|---|")
            for v in qv:
                print(f"| {v['workload']} | ({v['best_static_ring']}, {v['best_static_queues']}) | {yn(v, 'ring_can_help')} "
                      f"| (256, {v['start_queues']}) → ({v['pptune_ring']}, {v['pptune_queues']}), {v['pptune_changes']} changes "
                      f"| {yn(v, 'goodput_vs_best')} | {yn(v, 'goodput_ok')} | {yn(v, 'rings_first_ok')} "
                      f"| {yn(v, 'fewer_queues_only_when_needed_ok')} |")
    plot = [r for r in rows if r.get("kind") in ("pptune", "naive") and r.get("timeline")]
    if plot:
        svg_convergence(plot, stat, os.path.join(res_dir, f"{name}-convergence.svg"),
                        f"Convergence from ring 256 (ppsim, {plot[0].get('preset')} preset, VM)")
    return 0


# ------------------------------------------------------------------ A/B
def ab(jsonl, res_dir, a_dir, b_dir, same_pct=None):
    """benches/observe-ab.sh: B/A, A/floor and B/floor within each round,
    their median and min-max. With `--status`, B/A of the whole process
    (`pptune-status`), of the process alone (`pptune-start`, `--version`)
    and of their difference, the command's own work. With `same_pct`, 1
    unless B/A is within that many per cent of 1 in every round."""
    rows = [json.loads(l) for l in open(jsonl) if l.strip().startswith("{")]
    status = any(r.get("tool") == "pptune-status" for r in rows)
    pools = next((r["pools"] for r in rows if "pools" in r), None)
    summary = {}
    if status:
        key = "cpu_ms_per_run"
        groups = {}
        for r in rows:
            if r.get("tool") in ("pptune-status", "pptune-start"):
                groups.setdefault(r["round"], {})[(r["side"], r["tool"])] = r[key]
        for g in groups.values():
            for s in ("A", "B"):
                if (s, "pptune-status") in g and (s, "pptune-start") in g:
                    g[(s, "work")] = round(g[(s, "pptune-status")] - g[(s, "pptune-start")], 2)
        print(f"| round | side | status --json ms | --version ms | work ms |  ({pools} pools)")
        print("|---|---|---|---|---|")
        for k in sorted(groups):
            for s in ("A", "B"):
                g = groups[k]
                print(f"| {k} | {s} | " + " | ".join(
                    str(g.get((s, t), "-")) for t in ("pptune-status", "pptune-start", "work")) + " |")
        for t, name in (("pptune-status", "B/A status"), ("pptune-start", "B/A start"),
                        ("work", "B/A work")):
            w = sorted(round(g[("B", t)] / g[("A", t)], 4) for g in groups.values()
                       if ("A", t) in g and ("B", t) in g and g[("A", t)])
            d = sorted(round(g[("B", t)] - g[("A", t)], 2) for g in groups.values()
                       if ("A", t) in g and ("B", t) in g)
            summary[name] = {"median": w[len(w) // 2] if w else None, "by_round": w,
                             "b_minus_a_ms": d}
    else:
        groups = {}
        for r in rows:
            if r.get("tool") in ("pptune-pass", "raw-floor"):
                groups.setdefault(r["round"], {})[r["side"]] = r
        pairs = {"B/A": ("B", "A"), "A/floor": ("A", "floor"), "B/floor": ("B", "floor")}
        for name, (num, den) in pairs.items():
            w = [round(x, 4) for x, _ in within_rounds(groups, num, den)]
            summary[name] = {"median": w[len(w) // 2] if w else None, "by_round": w}
        print(f"| round | A µs | B µs | floor µs | B/A | A/floor | B/floor |  ({pools} pools)")
        print("|---|---|---|---|---|---|---|")
        for k in sorted(groups):
            g = groups[k]
            cpu = {s: g[s]["cpu_us_per_pass"] for s in ("A", "B", "floor") if s in g}
            q = lambda n, d: f"{cpu[n] / cpu[d]:.4f}" if n in cpu and d in cpu else "-"
            print(f"| {k} | {cpu.get('A', '-')} | {cpu.get('B', '-')} | {cpu.get('floor', '-')} "
                  f"| {q('B', 'A')} | {q('A', 'floor')} | {q('B', 'floor')} |")
    for name, v in summary.items():
        span = f" ({min(v['by_round'])}–{max(v['by_round'])})" if v["by_round"] else ""
        diff = f"; B − A {v['b_minus_a_ms']} ms" if "b_minus_a_ms" in v else ""
        print(f"{name}: {v['median']}{span}{diff}")
    verdict = None
    first = "B/A status" if status else "B/A"
    if same_pct is not None:
        w = summary[first]["by_round"]
        verdict = bool(w) and all(abs(x - 1) * 100 <= float(same_pct) for x in w)
        print(f"{first} within {same_pct} % of 1 in every round: {'yes' if verdict else 'NO'}")
    write(res_dir, "ab.json", {"meta": meta(), "a": a_dir, "b": b_dir, "pools": pools,
                               "what": "status" if status else "pass",
                               "summary": summary, "expect_same_pct": same_pct,
                               "same": verdict, "rows": rows})
    if not groups:
        print("no A/B rows", file=sys.stderr)
        return 1
    return 0 if verdict in (None, True) else 1


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "observe-cost":
        sys.exit(observe_cost(sys.argv[2], sys.argv[3]))
    if mode == "micro":
        sys.exit(micro(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    if mode == "outcome":
        sys.exit(outcome(sys.argv[2], sys.argv[3], *sys.argv[4:6]))
    if mode == "ab":
        sys.exit(ab(*sys.argv[2:7]))
    sys.exit(f"unknown mode {mode}")
