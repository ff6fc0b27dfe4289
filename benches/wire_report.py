#!/usr/bin/env python3
"""Tables and verdicts of the wire outcome bench (benches/wire-outcome.sh).

    benches/wire_report.py RESULTS.jsonl [RUN.json]  > RESULTS.md

Reads the driver's JSON lines (daemon/benches/wire_outcome.rs) and prints,
per workload, Markdown: the static sweep (mean over the rounds and the
range), best static, the tuned runs (max once, doubling, one-shot, naive,
pptune), and the issue's targets judged from these numbers only.

The figure is delivered application bytes per 10^9 busy guest instructions
(`bytes_per_gi`, shown in MB; higher is better): bytes TCP delivered in
order to the receiving sockets in the window (read by the application, or
queued unread: independent of where the readers are in their pause). Best
static: the ring with the best mean; the noise of one measured window is
sigma pooled over the sweep (each ring's rounds are repeats: mean range /
d2); the best static ring is the smallest ring whose mean is within 2
sigma of the best mean, and a tuned run is within the spread of best
static when its figure is. The same rule on slow-path allocations per
1,000 frames (lower is better) is printed beside it.
"""
import json
import sys
from collections import defaultdict

BASELINES = ["max-once", "doubling", "one-shot", "naive"]
TUNERS = BASELINES + ["pptune", "settle"]
# The shipped grow threshold: a window freeing less than this share of its
# returns is not a ring problem (policy::signals, GROW_AT in the driver).
GROW_AT = 0.05
MIB = 1 << 20


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:
        if "bytes_per_gi" in r:
            r["mb_per_gi"] = r["bytes_per_gi"] / 1e6
            # B's frames (kernel qstats; a page each, <= 1,448 payload bytes)
            # per 10^9 busy instructions, in thousands, and the delivered
            # bytes per frame that check the application's count: above
            # 1,448 or far below it, the window's byte count is off (the
            # drain pattern counted a drain's bytes at its end before
            # 6961ca37).
            r["kf_per_gi"] = r["frames"] * 100 / max(r["busy_jiffies"], 1) / 1e3
            r["bpf"] = r["app_bytes"] / max(r["frames"], 1)
    metas = [r for r in rows if r["kind"] == "meta"]
    meta = metas[0] if metas else {}
    # One kernel check per VM (benches/wire-outcome.sh --jobs): finished
    # when every VM that started reported one.
    kernels = [r for r in rows if r["kind"] == "kernel"]
    kernel = None
    if kernels and len(kernels) >= len(metas):
        kernel = {"trouble": [t for k in kernels for t in k["trouble"]]}
    return meta, kernel, rows


def delay(r, q):
    """The mice's delivery delay percentile `q` (p50, p99) of a window, µs."""
    d = r.get("delay_us")
    return d.get(q) if isinstance(d, dict) and d.get("n") else None


def fmt_delay(rs):
    """p50 / p99 over a point's rounds (mean of each), or '–'."""
    p50 = [delay(r, "p50") for r in rs if delay(r, "p50") is not None]
    p99 = [delay(r, "p99") for r in rs if delay(r, "p99") is not None]
    if not p50:
        return "–"
    return f"{mean(p50):.0f} / {mean(p99):.0f}"


def mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def sweep(rows, wl):
    """ring -> list of static rows (one per round)."""
    by = defaultdict(list)
    for r in rows:
        if r["kind"] == "static" and r["workload"] == wl:
            by[int(r["config"])].append(r)
    return dict(sorted(by.items()))


# d2: the mean range of n normal samples in units of their sigma.
D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326}


def noise(by, key):
    """Sigma of one measured window of `key`, pooled over the sweep: the mean
    range of each ring's rounds over d2 (every ring's rounds are repeats of
    one configuration). The best ring's own two rounds alone would be a
    two-sample range of the point picked for being highest (biased up, and
    a new measurement of the same ring falls below its lower end one time
    in three)."""
    groups = [[r[key] for r in rs] for rs in by.values()]
    n = min(len(g) for g in groups)
    ranges = [max(g) - min(g) for g in groups if len(g) >= 2]
    if n < 2 or not ranges:
        return 0.0
    return mean(ranges) / D2.get(n, D2[5])


def best_static(by, key, higher):
    """(best ring by mean, the band within the noise of it (best mean ± 2
    sigma, `noise`), the smallest ring whose mean is inside the band, the
    means)."""
    means = {ring: mean([r[key] for r in rs]) for ring, rs in by.items()}
    best = (max if higher else min)(means, key=lambda k: means[k])
    tol = 2 * noise(by, key)
    lo, hi = means[best] - tol, means[best] + tol
    ok = [ring for ring, m in means.items() if (m >= lo if higher else m <= hi)]
    return best, (lo, hi), min(ok), means


def fmt_range(rs, key, f="{:.0f}"):
    vals = [r[key] for r in rs]
    if len(vals) == 1:
        return f.format(vals[0])
    return (f + " [" + f + "–" + f + "]").format(mean(vals), min(vals), max(vals))


def static_table(by):
    out = ["| ring | MB / 10⁹ busy instr (mean [range]) | k frames / 10⁹ busy instr | bytes / frame | app MB/s (virtual) | slow / 1000 frames "
           "| ring_full / 1000 | cached / 1000 | ring / 1000 | host pool mem mean / max (MiB) "
           "| B overruns | sender retrans | DSACKs (run) | frames | mice delay p50 / p99 (µs) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for ring, rs in by.items():
        out.append(
            f"| {ring} | {fmt_range(rs, 'mb_per_gi', '{:.1f}')} | {fmt_range(rs, 'kf_per_gi', '{:.1f}')} "
            f"| {' / '.join(f'{r[chr(98) + chr(112) + chr(102)]:.0f}' for r in rs)} | {fmt_range(rs, 'app_mb_s', '{:.1f}')} "
            f"| {fmt_range(rs, 'slow_per_k', '{:.2f}')} | {fmt_range(rs, 'ring_full_per_k', '{:.1f}')} "
            f"| {mean([r['cached_per_k'] for r in rs]):.1f} | {mean([r['ring_per_k'] for r in rs]):.1f} "
            f"| {mem_cell(rs)} "
            f"| {' / '.join(str(r['overruns']) for r in rs)} | {' / '.join(str(r['retrans']) for r in rs)} "
            f"| {' / '.join(dsacks(r) for r in rs)} | {' / '.join(str(r['frames']) for r in rs)} | {fmt_delay(rs)} |")
    return out


def tuned_rows(rows, wl):
    """tuner -> its runs of `wl` (one per repeat, in run order)."""
    out = defaultdict(list)
    for r in rows:
        if r["kind"] == "tuned" and r["workload"] == wl:
            out[r["config"]].append(r)
    return dict(out)


def runs_label(name, runs, i):
    return name if len(runs) == 1 else f"{name} #{i + 1}"


def host_mem(r):
    """The pool memory a ring costs the host: every pool's pages in flight
    but a memory provider's (a dma-buf binding is pinned at its size
    whatever the ring; docs/decisions.md "Memory providers"). Rows from
    before the driver recorded it (`host_mem_mean`) had no provider."""
    return r.get("host_mem_mean", r["mem_mean"])


def mem_cell(rs):
    """Host pool memory mean / max over `rs` (MiB), or, where a provider's
    pools hold more, the host mean and the provider's mean beside it."""
    host = mean([host_mem(r) for r in rs])
    every = mean([r["mem_mean"] for r in rs])
    if every > host:
        return f"{host / MIB:.1f} (provider {(every - host) / MIB:.1f})"
    return f"{host / MIB:.1f} / {max(r['mem_max'] for r in rs) / MIB:.1f}"


def dsacks(r):
    """Duplicate segments the receiver saw over the whole traffic run
    (TcpExt.TCPDSACKOldSent in B's netns: the sender resent what had
    arrived), or '–' for rows recorded before the counter was kept."""
    snmp = r.get("rx_snmp_run")
    return str(snmp.get("TcpExt.TCPDSACKOldSent", 0)) if isinstance(snmp, dict) else "–"


def judged(label, results):
    """One target over a tuner's repeats: `results` is [(met, detail)] per
    repeat. Met only when every repeat meets it; met in some repeats and
    not in others is a miss, with the spread of the details."""
    n, k = len(results), sum(1 for ok, _ in results if ok)
    word = "met" if k == n else ("NOT met" if k == 0 else "missed")
    detail = "; ".join(d for _, d in results)
    return f"- {label}: {detail}: **{word}** (met in {k} of {n})"


def age_note(rows):
    """How far into their traffic the rows' windows began (`age_s`; rows
    of runs before it have none): figures compare at equal age only."""
    ages = [r["age_s"] for r in rows if r.get("age_s") is not None]
    if not ages:
        return ""
    lo, hi = min(ages), max(ages)
    return f", measured {lo:.0f} s into the traffic" if hi - lo < 0.5 else \
        f", measured {lo:.0f}–{hi:.0f} s into the traffic"


def each_run(tuned):
    """(tuner, repeat index, row) in TUNERS order."""
    for name in TUNERS:
        for i, r in enumerate(tuned.get(name, [])):
            yield name, i, r


def tuner_summary(tuned):
    """Per tuner over its repeats: figure, final ring, pool memory and
    changes as mean [range]."""
    out = ["| tuner | runs | MB / 10⁹ busy instr | final ring | host pool mem mean (MiB) | changes |",
           "|---|---|---|---|---|---|"]
    for name in TUNERS:
        rs = tuned.get(name)
        if not rs:
            continue
        mem = [dict(r, mem_mib=host_mem(r) / MIB) for r in rs]
        out.append(f"| {name} | {len(rs)} | {fmt_range(rs, 'mb_per_gi', '{:.1f}')} | {fmt_range(rs, 'ring')} "
                   f"| {fmt_range(mem, 'mem_mib', '{:.1f}')} | {fmt_range(rs, 'changes')} |")
    return out


def tuned_table(by, best_ring, best_row_vals, tuned):
    out = ["| config | MB / 10⁹ busy instr | k frames / 10⁹ busy instr | app MB/s | slow / 1000 | ring_full / 1000 | final ring "
           "| changes | last change (s) | host pool mem mean / max (MiB) | B overruns | retrans | DSACKs (run) | mice delay p50 / p99 (µs) | note |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rs = by[best_ring]
    out.append(
        f"| best static ({best_ring}) | {fmt_range(rs, 'mb_per_gi', '{:.1f}')} | {fmt_range(rs, 'kf_per_gi', '{:.1f}')} "
        f"| {fmt_range(rs, 'app_mb_s', '{:.1f}')} "
        f"| {fmt_range(rs, 'slow_per_k', '{:.2f}')} | {fmt_range(rs, 'ring_full_per_k', '{:.1f}')} "
        f"| {best_ring} | 0 | – | {mem_cell(rs)} | {' / '.join(str(r['overruns']) for r in rs)} "
        f"| {' / '.join(str(r['retrans']) for r in rs)} | {' / '.join(dsacks(r) for r in rs)} | {fmt_delay(rs)} "
        f"| {len(rs)} rounds{age_note(rs)} |")
    for name, i, r in each_run(tuned):
        note = [age_note([r]).lstrip(", ")] if r.get("age_s") is not None else []
        if r.get("changed_in_window"):
            note.append("ring changed in the measured window")
        if r.get("stopped_by_max"):
            note.append("stopped by --max-run-secs before its quiet time")
        if r.get("daemon_cpu_s") is not None:
            note.append(f"daemon CPU {r['daemon_cpu_s']:.2f} s")
        if r.get("intact") is not True:
            note.append("STREAMS NOT INTACT")
        st = r.get("settle")
        if st:
            note.append(f"settle: converged at {st['converged_s']:.0f} s, then {st['changes_in_watch']} changes "
                        f"in {st['watch_s']:.0f} s (calm_before_shrink {st['calm_before_shrink_s']:.0f} s)")
        out.append(
            f"| {runs_label(name, tuned[name], i)} | {r['mb_per_gi']:.1f} | {r['kf_per_gi']:.1f} | {r['app_mb_s']:.1f} | {r['slow_per_k']:.2f} "
            f"| {r['ring_full_per_k']:.1f} | {r['ring']} | {r['changes']} | {r['last_change_s']:.1f} "
            f"| {mem_cell([r])} | {r['overruns']} | {r['retrans']} "
            f"| {dsacks(r)} | {fmt_delay([r])} | {'; '.join(note)} |")
    return out


def verdicts(by, best_ring, spread, tuned, key="mb_per_gi", label="MB / 10⁹ busy instructions", slow_ring=None):
    """§3's targets for pptune, each judged in every repeat (`judged`)."""
    ps = tuned.get("pptune")
    if not ps:
        return ["(no pptune run)"]
    lo, hi = spread
    out = [judged(f"figure ({label}) within the noise of best static (band {lo:.1f}–{hi:.1f}, best mean ± 2σ)",
                  [(p[key] >= lo, f"{p[key]:.1f}") for p in ps]),
           judged(f"ring ≤ 2× best static ring ({best_ring}: ≤ {2 * best_ring})",
                  [(p["ring"] <= 2 * best_ring, str(p["ring"])) for p in ps])]
    if slow_ring is not None:
        out.append(judged(f"ring ≤ 2× the best static ring by slow-path allocations ({slow_ring}: ≤ {2 * slow_ring}; "
                          f"the estimator against the ring_full knee)",
                          [(p["ring"] <= 2 * slow_ring,
                            f"{p['ring']} ({p['slow_per_k']:.2f} slow, {p['ring_full_per_k']:.1f} ring_full / 1000)")
                           for p in ps]))
    out.append(judged("≤ 2 changes", [(p["changes"] <= 2, str(p["changes"])) for p in ps]))
    ms = tuned.get("max-once")
    if ms:
        m_mem = mean([host_mem(m) for m in ms])
        quarter = mean([m["ring"] for m in ms]) / 4
        if best_ring <= quarter:
            out.append(judged(f"host pool memory ≤ ¼ of max once's (best static {best_ring} ≤ max/4 = {quarter:.0f}; "
                              f"max once {m_mem / MIB:.1f} MiB, so ≤ {m_mem / 4 / MIB:.1f})",
                              [(host_mem(p) <= m_mem / 4, f"{host_mem(p) / MIB:.1f}") for p in ps]))
        else:
            out.append(f"- pool memory vs max once: not judged (best static {best_ring} > max/4 = {quarter:.0f})")
    width = (hi - lo) / 2
    for name in BASELINES:
        bs = tuned.get(name)
        if not bs:
            continue
        b = mean([r[key] for r in bs])
        b_mem = mean([host_mem(r) for r in bs])
        out.append(judged(f"at least {name}'s figure (its mean {b:.1f} over {len(bs)} runs, less 2σ = {width:.1f}; "
                          f"host memory: pptune {mean([host_mem(p) for p in ps]) / MIB:.1f} against "
                          f"{b_mem / MIB:.1f} MiB; changes {mean([p['changes'] for p in ps]):.1f} against "
                          f"{mean([r['changes'] for r in bs]):.1f})",
                          [(p[key] >= b - width, f"{p[key]:.1f}") for p in ps]))
    return out


def held_beyond(by):
    """(slow / 1000 at the largest ring, smallest ring with no ring_full)
    when the largest ring still takes the slow path (>= 1 per 1,000
    frames) with no ring_full (< 1 per 1,000): held pages no ring fixes.
    None otherwise."""
    top = by[max(by)]
    slow = mean([r["slow_per_k"] for r in top])
    if slow < 1.0 or mean([r["ring_full_per_k"] for r in top]) >= 1.0:
        return None
    clear = min(k for k, rs in by.items() if mean([r["ring_full_per_k"] for r in rs]) < 1.0)
    return slow, clear


def behaviour_verdicts(by, tuned):
    """The targets that are not about the figure: no ring growth where the
    slow path comes from held pages (the sweep's smallest ring takes the
    slow path while freeing < GROW_AT of its returns to a full ring), and
    no change over 2 x calm_before_shrink after convergence (settle)."""
    out = []
    ps = tuned.get("pptune") or []
    first = by[min(by)]
    slow = mean([r["slow_per_k"] for r in first])
    share = mean([r["ring_full_share"] or 0.0 for r in first])
    if ps and slow >= 1.0 and share < GROW_AT:
        out.append(judged(f"held pages (ring {min(by)}: {slow:.2f} slow / 1000 frames, ring_full share {share:.3f}; "
                          f"target: no growth): pptune changes, ring",
                          [(p["changes"] == 0, f"{p['changes']}, {p['ring']}") for p in ps]))
    elif ps and share >= GROW_AT and (beyond := held_beyond(by)):
        # Part of the slow path is tunable (ring_full at the small rings),
        # part comes from held pages (it stays at the largest ring with no
        # ring_full): growth must stop where ring_full does.
        top, clear = beyond
        out.append(judged(f"held pages beyond any ring (ring {max(by)}: {top:.2f} slow / 1000 frames, no ring_full; "
                          f"ring_full reaches 0 at {clear}; target: no growth past 2 × {clear} = {2 * clear})",
                          [(p["ring"] <= 2 * clear, f"ring {p['ring']} after {p['changes']} changes, "
                            f"{p['slow_per_k']:.2f} slow / 1000 left") for p in ps]))
    elif ps and share < GROW_AT:
        out.append(judged(f"nothing to tune (ring {min(by)}: {slow:.2f} slow / 1000 frames, ring_full share "
                          f"{share:.3f}; target: no change; the held-pages case is not exercised here)",
                          [(p["changes"] == 0, str(p["changes"])) for p in ps]))
    return out + settle_verdict(tuned)


def settle_verdict(tuned):
    """The settle check (tuner `settle`): no change over 2 ×
    calm_before_shrink after convergence, in every run. Needs no sweep."""
    rs = tuned.get("settle")
    if not rs:
        return []
    results = []
    for r in rs:
        st = r.get("settle")
        if not st:
            results.append((False, "never converged (no quiet spell)"))
            continue
        results.append((st["changes_in_watch"] == 0 and st["watch_s"] >= 2 * st["calm_before_shrink_s"],
                        f"converged at {st['converged_s']:.0f} s (ring {r['ring']}, {r['changes']} changes), then "
                        f"{st['changes_in_watch']} changes in {st['watch_s']:.0f} s "
                        f"(2 × calm_before_shrink = {2 * st['calm_before_shrink_s']:.0f} s)"))
    return [judged("settle", results)]


def workload(rows, wl):
    by = sweep(rows, wl)
    if not by:
        # A tuned-only run (--rounds 0): what needs no sweep.
        st = settle_verdict(tuned_rows(rows, wl))
        return [f"### {wl}", "", "No static sweep in this run (`--rounds 0`).", ""] + st + [""] if st else []
    best, spread, best_ring, _ = best_static(by, "mb_per_gi", True)
    sbest, sspread, sring, _ = best_static(by, "slow_per_k", False)
    tuned = tuned_rows(rows, wl)
    out = [f"### {wl}", "", "Static sweep (one fresh wire per point; rounds interleaved):", ""]
    out += static_table(by)
    out += ["", f"Best static on MB delivered per 10⁹ busy instructions: best mean at ring {best} "
                f"(within its noise: {spread[0]:.1f}–{spread[1]:.1f}); smallest ring within: **{best_ring}**. "
                f"On slow-path allocations per 1,000 frames: best mean at {sbest} "
                f"({sspread[0]:.2f}–{sspread[1]:.2f}); smallest ring within: **{sring}**.", ""]
    out += tuned_table(by, best_ring, spread, tuned)
    out += [""]
    if any(len(rs) > 1 for rs in tuned.values()):
        out += ["Per tuner over its repeats (mean [range]):", ""] + tuner_summary(tuned) + [""]
    for name, i, r in each_run(tuned):
        if r.get("timeline"):
            steps = ", ".join(f"{t:.0f}s:{ring}" + ("" if s is None else f"({s:.2f})")
                              for t, ring, s in r["timeline"])
            out.append(f"- {runs_label(name, tuned[name], i)} timeline (s: ring (ring_full share of the window)): {steps}")
    fbest, fspread, fring, _ = best_static(by, "kf_per_gi", True)
    out += ["", f"Best static on thousand frames per 10⁹ busy instructions (kernel-counted): best mean at "
                f"{fbest} (within its noise: {fspread[0]:.1f}–{fspread[1]:.1f}); smallest ring within: **{fring}**."]
    out += ["", "Targets (pptune, from the rows above):", ""]
    out += verdicts(by, best_ring, spread, tuned, slow_ring=sring)
    out += verdicts(by, fring, fspread, tuned, "kf_per_gi", "k frames / 10⁹ busy instructions")
    out += behaviour_verdicts(by, tuned)
    return out + [""]


SEVERE = 0.20
# The share under which the freed returns count as remedied (issue 47 §5).
REMEDIED = 0.05


def remedied_at(timeline, onset):
    """The end of the first control window from which on every window with
    a share read has it under REMEDIED (None: the run ended above it)."""
    after = [(t, sh) for t, _, sh in timeline if sh is not None and t > onset]
    at = None
    for t, sh in after:
        if sh >= REMEDIED:
            at = None
        elif at is None:
            at = t
    return at


def spread(values):
    vs = sorted(v for v in values if v is not None)
    if not vs:
        return "—"
    mid = vs[len(vs) // 2] if len(vs) % 2 else (vs[len(vs) // 2 - 1] + vs[len(vs) // 2]) / 2
    return f"median {mid:.0f}, {vs[0]:.0f}–{vs[-1]:.0f} (n={len(vs)})"


def remedy(rows, wl, interval):
    """Time to remedy (issue 29 part 4, issue 47 §5): per pptune run of
    `wl`, from the end of the first control window whose ring_full share
    (the kernel's counters, read by the bench) is >= 20 % to pptune's
    first change, and to the remedy: the first window from which on the
    share stays under 5 %. `onset offset`: how far into pptune's sampling
    interval the run's traffic started (--onset-seed)."""
    runs = [r for r in rows if r["kind"] == "tuned" and r["workload"] == wl
            and r["config"] == "pptune" and r.get("timeline")]
    if not runs:
        return []
    out = [f"Time to remedy, pptune at {interval:g} s samples: from the first control window with "
           f"≥ {SEVERE:.0%} of returns freed to the first change, and to the remedy (the share "
           f"under {REMEDIED:.0%} from then on)", "",
           "| run | onset offset (s) | onset (s) | first change (s) | to the first change (s) | in samples "
           "| to the remedy (s) | ring → | changes |",
           "|---|---|---|---|---|---|---|---|---|"]
    firsts, remedies = [], []
    for i, r in enumerate(runs, 1):
        onset = next((t for t, _, sh in r["timeline"] if sh is not None and sh >= SEVERE), None)
        first = r.get("first_change_s")
        took = None if onset is None or first is None else first - onset
        samples = None if took is None else took / interval
        fixed = None if onset is None else remedied_at(r["timeline"], onset)
        cured = None if fixed is None else fixed - onset
        off = r.get("onset_offset_s")
        out.append(f"| {i} | {'—' if off is None else f'{off:.1f}'} | "
                   f"{'—' if onset is None else f'{onset:.0f}'} | "
                   f"{'none' if first is None else f'{first:.0f}'} | "
                   f"{'—' if took is None else f'{took:.0f}'} | {'—' if samples is None else f'{samples:.1f}'} | "
                   f"{'not remedied' if cured is None and onset is not None else ('—' if cured is None else f'{cured:.0f}')} | "
                   f"{r['ring']} | {r['changes']} |")
        firsts.append(samples)
        remedies.append((onset is not None, cured))
    ok = all(v is not None and v <= 3 for v in firsts)
    out += ["",
            f"- to the first change: {spread([f * interval if f is not None else None for f in firsts])} s",
            f"- to the remedy: {spread([c for _, c in remedies])} s; "
            f"{sum(1 for o, c in remedies if o and c is None)} of {len(runs)} runs not remedied",
            f"- first change within 3 samples of the onset in every run: **{'met' if ok else 'NOT met'}**"]
    return out + [""]


def main():
    meta, kernel, rows = load(sys.argv[1])
    run = json.load(open(sys.argv[2])) if len(sys.argv) > 2 else {}
    wls = []
    for r in rows:
        if r["kind"] == "workload" and r["workload"] not in wls:
            wls.append(r["workload"])
    aged = "" if meta.get("age_secs") is None else f", every row at age {meta['age_secs']} s or later"
    print(f"Clock: {meta.get('clock')}, {meta.get('cpus')} vCPU; rounds {meta.get('rounds')}, warm-up "
          f"{meta.get('warmup_secs')} s, window {meta.get('window_secs')} s{aged}; tuners from ring "
          f"{meta.get('start_ring')}, control window {meta.get('ctl_window_secs')} s, quiet "
          f"{meta.get('quiet_secs')} s (pptune {meta.get('pptune_quiet_secs')} s), at most "
          f"{meta.get('max_run_secs')} s; policy {meta.get('policy')}.")
    # One run, or a run split into parts (wire-outcome.sh --passes): a line each.
    for part in run.get("parts", [run] if run else []):
        vms = part.get("vms") or []
        units = "; ".join(f"VM {i}: " + ", ".join(f"{u['unit']} {u['virtual_s']} s" for u in vm["units"])
                          for i, vm in enumerate(vms) if vm.get("units"))
        print(f"Run{' ' + part['name'] if 'name' in part else ''}: git {part.get('git')}, {len(vms) or 1} VM(s) "
              f"side by side, at most {part.get('driver_virtual_s')} s of guest time each, "
              f"{part.get('host_total_s')} s on the host (builds excluded, boots included)"
              + (f"; guest time per unit: {units}." if units else "."))
    print()
    for wl in wls:
        print("\n".join(workload(rows, wl)))
        interval = meta.get("policy_interval_s")
        # The time to remedy needs the bench's counters every second
        # (wire-outcome.sh --remedy): coarser control windows cannot place
        # the onset.
        if interval and meta.get("ctl_window_secs") == 1:
            print("\n".join(remedy(rows, wl, interval)))
    if kernel is None:
        print("**The run did not finish (no kernel check line).**")
        return 1
    if kernel["trouble"]:
        print("**Kernel log trouble:**\n\n" + "\n".join(f"    {t}" for t in kernel["trouble"]))
        return 1
    print("Kernel log: no warning, oops or stalled pool shutdown during the run.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
