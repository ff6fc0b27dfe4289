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
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path}", file=sys.stderr)


# ------------------------------------------------------------------ observe-cost
def observe_cost(jsonl, res_dir):
    rows = [json.loads(l) for l in open(jsonl) if l.strip().startswith("{")]
    errors = [r for r in rows if "error" in r]
    by = {}
    for r in rows:
        by.setdefault(r["tool"], {})[r["pools"]] = r
    base = by.get("baseline", {}).get(0, {})
    sizes = sorted(by.get("pptune-pass", {}))
    summary = []
    for n in sizes:
        p = by["pptune-pass"][n]
        f = by.get("raw-floor", {}).get(n, {})
        s = by.get("pptune-status", {}).get(n, {})
        y = by.get("ynl-cli", {}).get(n, {})
        t = by.get("ynltool", {}).get(n, {})
        e = by.get("pptune-encode", {}).get(n, {})
        def ratio(a, b):
            return round(a / b, 2) if a and b else None
        summary.append({
            "pools": n,
            "devices": p.get("devices"),
            "pass_cpu_us": p["cpu_us_per_pass"],
            "pass_wall_us": p["wall_us_per_pass"],
            "pass_allocs": p["allocs_per_pass"],
            "pass_alloc_bytes": p["alloc_bytes_per_pass"],
            "pass_maxrss_kib": p["maxrss_kib"],
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
    # Linearity: per-pool cost between the two largest sizes vs the largest.
    if len(summary) >= 3:
        a, b = summary[-2], summary[-1]
        slope = (b["pass_cpu_us"] - a["pass_cpu_us"]) / (b["pools"] - a["pools"])
        targets["pass_cpu_us_per_extra_pool"] = round(slope, 2)
        per_pool = [round(r["pass_cpu_us"] / r["pools"], 2) for r in summary]
        targets["pass_cpu_us_per_pool_by_size"] = per_pool
    res = {"meta": meta(), "vm": "qemu TCG (emulated), kernel 7.3, 2 vCPU, 2048 MiB; ratios from one run",
           "baseline_process": base, "summary": summary, "targets": targets,
           "errors": errors, "rows": rows}
    write(res_dir, "observe-cost.json", res)
    hdr = ("| pools | pass CPU µs | floor CPU µs | pass/floor | pass allocs | pass RSS KiB | encode CPU µs "
           "| status CPU ms | status RSS KiB | ynltool CPU ms | status/ynltool | ynl CLI CPU ms | ynl/status |")
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    for r in summary:
        print(f"| {r['pools']} | {r['pass_cpu_us']:.0f} | {r['floor_cpu_us'] or 0:.0f} | {r['pass_over_floor_cpu']} "
              f"| {r['pass_allocs']:.0f} | {r['pass_maxrss_kib']} | {r['encode_cpu_us']} "
              f"| {r['status_cpu_ms']} | {r['status_maxrss_kib']} "
              f"| {r['ynltool_cpu_ms']} | {r['status_over_ynltool_cpu']} | {r['ynl_cli_cpu_ms']} | {r['ynl_cli_over_status_cpu']} |")
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
    ], os.path.join(res_dir, "observe-cost.svg"), "Cost of one observe pass vs page pools (VM, TCG)")
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


def settled_from_timeline(pp):
    """outcome.rs's goodput_settled_pps for rows recorded before it existed:
    the 1 s samples from 3 s after the last change, plus the final window
    (weighted by its length, the run's end minus the last sample)."""
    tl = pp.get("timeline") or []
    if not tl or not pp.get("enforce_secs"):
        return None
    last_change = max((b[0] for a, b in zip(tl, tl[1:]) if b[1] != a[1]), default=0.0)
    tail = [g for t, _, g in tl if t > last_change + 3]
    w = max(0.0, pp["enforce_secs"] - tl[-1][0])
    if not tail and not w:
        return None
    return (sum(tail) + pp["goodput_pps"] * w) / (len(tail) + w)


def verdicts(rows, period_s):
    """Issue 7's outcome targets, per workload, from one run's rows."""
    out = []
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r.get("preset")), {}).setdefault(r["config"], r)
    for (wl, preset), cfg in by.items():
        best, mx, pp = cfg.get("best-static"), cfg.get("max"), cfg.get("pptune-enforce")
        if not (best and mx and pp):
            continue
        v = {"workload": wl, "preset": preset, "best_static_ring": best["ring_final"],
             "pptune_ring": pp["ring_final"], "changes": pp.get("changes")}
        if best.get("goodput_pps", 0) > 0:
            # pptune's settled mean (a minute of 1 s samples after its last
            # change) when the run recorded it, else its final window.
            g = pp.get("goodput_settled_pps") or settled_from_timeline(pp) or pp["goodput_pps"]
            v["goodput_vs_best"] = round(g / best["goodput_pps"], 3)
            v["goodput_ok"] = v["goodput_vs_best"] >= 0.95
        needs_max = best["ring_final"] >= mx["ring_final"]
        if mx.get("inflight_mem", 0) > 0 and not needs_max:
            v["mem_vs_max"] = round(pp["inflight_mem"] / mx["inflight_mem"], 3)
            v["mem_ok"] = v["mem_vs_max"] <= 0.5
        # Convergence: the first moment the ring is within one power of two
        # of the best static ring, and the changes it took to get there.
        lo, hi = best["ring_final"] / 2, best["ring_final"] * 2
        tl = pp.get("timeline") or []
        changes, last, reached = 0, None, None
        for t, ring, _ in tl:
            if last is not None and ring != last:
                changes += 1
            last = ring
            if reached is None and lo <= ring <= hi:
                reached = (t, changes)
        if reached is None and lo <= pp["ring_final"] <= hi:
            reached = (pp.get("enforce_secs"), pp.get("changes"))
        if reached:
            v["within_pow2_at_s"], v["changes_to_within_pow2"] = reached
            v["converge_ok"] = reached[1] <= 2 and (reached[0] or 0) <= 2 * period_s
            after = sum(1 for (a, b) in zip(tl, tl[1:]) if b[1] != a[1] and b[0] > reached[0])
            if pp["ring_final"] != (tl[-1][1] if tl else pp["ring_final"]):
                after += 1
            v["changes_after_convergence"] = after
            v["watched_after_convergence_s"] = round(pp.get("enforce_secs", 0) - reached[0], 1)
            v["settled_ok"] = after <= 1
        else:
            v["converge_ok"] = False
        # Independent of the best ring: changes after two periods (where
        # convergence is due), over the rest of the run.
        late = [b for (a, b) in zip(tl, tl[1:]) if b[1] != a[1] and b[0] > 2 * period_s]
        v["changes_after_two_periods"] = len(late)
        v["watched_after_two_periods_s"] = round(max(0, (pp.get("enforce_secs") or 0) - 2 * period_s), 1)
        out.append(v)
    return out


def best_static(rows):
    """The best static ring of each (workload, preset), from its sweep rows:
    the smallest ring whose goodput is within 5 % of the sweep's best (the
    outcome target's own tolerance; the VM's noise is of that order) and
    that drops at most 1 % of what arrived. The drop condition matters for
    rate-limited workloads, where every ring delivers about the offered rate
    and goodput alone cannot tell a ring that drops from one that does not.
    The row carries the sweep's best goodput (what pptune is held to) and
    the ring's own as ring_goodput_pps."""
    out = []
    sweeps = {}
    for r in rows:
        if r.get("kind") == "static":
            sweeps.setdefault((r["workload"], r.get("preset")), []).append(r)
    for pts in sweeps.values():
        top = max(p.get("goodput_pps", 0) for p in pts)
        near = [p for p in pts if p.get("goodput_pps", 0) >= 0.95 * top]
        clean = [p for p in near
                 if p.get("dropped_pps", 0) <= 0.01 * (p.get("goodput_pps", 0) + p.get("dropped_pps", 0))]
        pick = min(clean or near, key=lambda p: p["ring_final"])
        out.append(dict(pick, kind="best_static", config="best-static", goodput_pps=top,
                        ring_goodput_pps=pick.get("goodput_pps", 0)))
    return out


def outcome(jsonl, res_dir, name="outcome", policy=None):
    rows = [json.loads(l) for l in open(jsonl) if l.strip().startswith("{")]
    # One definition of "best static" for every run, old or new: the
    # driver's own best_static rows (older runs) are replaced.
    rows = [r for r in rows if r.get("kind") != "best_static"]
    best = {(b["workload"], b.get("preset")): b for b in best_static(rows)}
    merged = []
    for r in rows:
        if r.get("kind") == "pptune" and (r["workload"], r.get("preset")) in best:
            merged.append(best.pop((r["workload"], r.get("preset"))))
        merged.append(r)
    rows = merged + list(best.values())
    period = policy_period_s(policy) if policy else None
    ver = verdicts(rows, period) if period else []
    write(res_dir, f"{name}.json", {
        "meta": meta(),
        "vm": "qemu TCG (emulated), kernel 7.3, 2048 MiB; goodput in pages/s delivered by ppsim",
        "period_s": period,
        "verdicts": ver,
        "rows": rows})
    print("| workload | preset | config | ring | goodput pps | ring_full share | slow share | inflight MiB | converge s | changes |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        # The table: default, max, best static and pptune; the other sweep
        # points are in the JSON.
        if r.get("config") not in ("default", "max", "best-static", "pptune-enforce"):
            continue
        print(f"| {r['workload']} | {r.get('preset')} | {r['config']} | {r.get('ring_final')} | {r.get('goodput_pps', 0):.0f} "
              f"| {r.get('ring_full_share', 0):.3f} | {r.get('slow_share', 0):.3f} "
              f"| {r.get('inflight_mem', 0) / 2**20:.1f} | {r.get('converge_s', '–')} | {r.get('changes', '–')} |")
    if ver:
        def yn(v, k, fmt="{}"):
            if k not in v:
                return "–"
            return fmt.format(v[k])
        print()
        print(f"Targets (one cooldown + evaluation period = {period:g} s):")
        print()
        print("| workload | preset | best static ring | pptune ring | goodput / best | ≥ 0.95 | memory / max ring's | ≤ 0.5 | within 2× of best at s (changes) | ≤ 2 changes, ≤ 2 periods | changes after (watched s) | ≤ 1 | changes after 2 periods (watched s) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for v in ver:
            reach = (f"{v['within_pow2_at_s']} ({v['changes_to_within_pow2']})"
                     if "within_pow2_at_s" in v else "never")
            after = (f"{v['changes_after_convergence']} ({v['watched_after_convergence_s']})"
                     if "changes_after_convergence" in v else "–")
            print(f"| {v['workload']} | {v['preset']} | {v['best_static_ring']} | {v['pptune_ring']} "
                  f"| {yn(v, 'goodput_vs_best')} | {yn(v, 'goodput_ok')} | {yn(v, 'mem_vs_max')} | {yn(v, 'mem_ok')} "
                  f"| {reach} | {yn(v, 'converge_ok')} | {after} | {yn(v, 'settled_ok')} "
                  f"| {v['changes_after_two_periods']} ({v['watched_after_two_periods_s']}) |")
    runs = [r for r in rows if r.get("kind") == "pptune" and r.get("timeline")]
    if runs:
        svg_plot([
            ("RX ring under pptune enforce", "ring entries",
             {r["workload"]: [(t, ring) for t, ring, _ in r["timeline"]] for r in runs}),
            ("goodput under pptune enforce", "k pages/s (1 s samples)",
             {r["workload"]: [(t, g / 1e3) for t, _, g in r["timeline"]] for r in runs}),
        ], os.path.join(res_dir, f"{name}-convergence.svg"),
            f"Convergence from ring 256 (ppsim, {runs[0].get('preset')} preset, VM)",
            xlabel="seconds", xticks=False)
    return 0


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "observe-cost":
        sys.exit(observe_cost(sys.argv[2], sys.argv[3]))
    if mode == "micro":
        sys.exit(micro(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))
    if mode == "outcome":
        sys.exit(outcome(sys.argv[2], sys.argv[3], *sys.argv[4:6]))
    sys.exit(f"unknown mode {mode}")
