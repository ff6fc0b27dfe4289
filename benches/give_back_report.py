#!/usr/bin/env python3
"""Tables and verdicts of the give-back runs of the wire bench
(benches/wire-outcome.sh with the give-back-stop, give-back-steady, settle
and right-size tuners; daemon/benches/wire_outcome.rs).

    benches/give_back_report.py RESULTS.jsonl [SWEEP.jsonl] > RESULTS.md

SWEEP.jsonl: a run with a static sweep (benches/results/wire-outcome.jsonl)
for the right-size verdict: the smallest static ring whose freed share
(ring_full share, the kernel's counters) is under the shrink threshold, in
every round.

Targets (docs/decisions.md §7):
- give-back: after the load stops or turns steady, the ring ends <= 2x the
  original and the pool memory <= 1/2 of the grown pool's, within 2 x
  calm_before_shrink + one evaluation of the switch;
- settle: a stationary bursty load keeps its ring over the watch (the
  ring at its end is the converged one; changes in the watch are listed);
- right-size: from the device's max, the ring ends <= 2x the smallest
  good static ring, the freed share under the shrink threshold, in <= 4
  changes.
"""
import json
import sys
from collections import defaultdict

SHRINK_AT = 0.005  # the shipped thresholds.shrink_recycle_miss
MIB = 1 << 20


def rows_of(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def smallest_good(sweep_rows):
    """Per workload: the smallest static ring whose ring_full share is
    under the shrink threshold in every round."""
    by = defaultdict(lambda: defaultdict(list))
    for r in sweep_rows:
        if r.get("kind") == "static" and r.get("ring_full_share") is not None:
            by[r["workload"]][r["ring"]].append(r["ring_full_share"])
    out = {}
    for wl, rings in by.items():
        good = [ring for ring, s in sorted(rings.items()) if max(s) < SHRINK_AT]
        if good:
            out[wl] = (good[0], {ring: max(s) for ring, s in rings.items()})
    return out


def give_back(rows):
    out = ["## Give back: the load stops or turns steady", "",
           "| workload | then | grown ring | grown pool MiB | ring at 2×calm+eval | pool MiB then | ring end | pool MiB end | ring / original | memory / grown | first give-back (s after the switch) | changes in watch | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("kind") != "give-back":
            continue
        limit = 2 * r["calm_before_shrink_s"] + r["evaluation_s"]
        # The last timeline point at or before the limit.
        at = [p for p in r["timeline"] if p[0] <= limit + 0.5]
        t_ring, t_mem = (at[-1][1], at[-1][3]) if at else (r["grown_ring"], r["grown_mem"])
        ok = t_ring <= 2 * r["start_ring"] and t_mem <= r["grown_mem"] / 2
        fg = r.get("first_give_back_s")
        out.append(
            f"| {r['workload']} | {r['config'].removeprefix('give-back-')} | {r['grown_ring']} | "
            f"{r['grown_mem'] / MIB:.1f} | {t_ring} | {t_mem / MIB:.1f} | {r['ring']} | {r['mem'] / MIB:.1f} | "
            f"{r['ring'] / r['start_ring']:.2f} | {r['mem'] / max(r['grown_mem'], 1):.2f} | "
            f"{'none' if fg is None else f'{fg:.0f}'} | {r['changes_in_watch']} | {'**met**' if ok else '**NOT met**'} |")
    out += ["", "Timelines (s after the switch: ring, ring_full share, pool MiB):", ""]
    for r in rows:
        if r.get("kind") == "give-back":
            pts = ", ".join(f"{t:.0f}:{ring}({'-' if s is None else f'{s:.3f}'},{m / MIB:.1f})"
                            for t, ring, s, m in r["timeline"])
            out.append(f"- {r['workload']} {r['config']}: {pts}")
    return out + [""]


def settle(rows):
    out = ["## Stationary bursty load: the ring is kept", "",
           "| workload | converged at (s) | ring | watch (s) | calm (s) | changes in watch | ring at the end | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("kind") != "tuned" or r.get("config") != "settle" or not r.get("settle"):
            continue
        st = r["settle"]
        # The ring when it converged: the timeline's ring at that time.
        conv = [ring for t, ring, _ in r["timeline"] if t <= st["converged_s"] + 0.5]
        conv_ring = conv[-1] if conv else None
        ok = conv_ring == r["ring"] and st["watch_s"] >= 3 * st["calm_before_shrink_s"]
        out.append(f"| {r['workload']} | {st['converged_s']:.0f} | {conv_ring} | {st['watch_s']:.0f} | "
                   f"{st['calm_before_shrink_s']:.0f} | {st['changes_in_watch']} | {r['ring']} | "
                   f"{'**met**' if ok else '**NOT met**'} |")
    out += ["", "Timelines (s: ring (ring_full share)):", ""]
    for r in rows:
        if r.get("kind") == "tuned" and r.get("config") == "settle":
            out.append(f"- {r['workload']}: " + ", ".join(
                f"{t:.0f}:{ring}({'-' if s is None else f'{s:.3f}'})" for t, ring, s in r["timeline"]))
    return out + [""]


def right_size(rows, good):
    out = ["## Right-sizing from the device's max", "",
           f"Smallest good static ring: the smallest ring of the sweep whose ring_full share is under "
           f"{SHRINK_AT} in every round.", "",
           "| workload | max | ring end | smallest good static | ring / it | freed share (end window) | harm (overruns, retrans) | changes | pool MiB end | MiB reclaimed vs max (static max row) | verdict |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("kind") != "tuned" or r.get("config") != "right-size":
            continue
        g = good.get(r["workload"])
        gring, shares = g if g else (None, {})
        ratio = r["ring"] / gring if gring else None
        share = r.get("ring_full_share")
        ok = (ratio is not None and ratio <= 2 and (share or 0) < SHRINK_AT and r["changes"] <= 4)
        out.append(
            f"| {r['workload']} | {r['max_ring']} | {r['ring']} | {gring or '—'} | "
            f"{'—' if ratio is None else f'{ratio:.2f}'} | {'—' if share is None else f'{share:.4f}'} | "
            f"{r.get('overruns')}, {r.get('retrans')} | {r['changes']} | {r['mem_mean'] / MIB:.1f} | "
            f"{r.get('_max_mem', 0) / MIB - r['mem_mean'] / MIB:.1f} | {'**met**' if ok else '**NOT met**'} |")
    out += ["", "Timelines (s: ring (ring_full share)):", ""]
    for r in rows:
        if r.get("kind") == "tuned" and r.get("config") == "right-size":
            out.append(f"- {r['workload']}: " + ", ".join(
                f"{t:.0f}:{ring}({'-' if s is None else f'{s:.3f}'})" for t, ring, s in r["timeline"]))
    return out + [""]


def main():
    rows = rows_of(sys.argv[1])
    sweep = rows_of(sys.argv[2]) if len(sys.argv) > 2 else []
    good = smallest_good(sweep)
    # The pool memory at the max ring, from the sweep's static rows.
    max_mem = defaultdict(list)
    for r in sweep:
        if r.get("kind") == "static":
            max_mem[(r["workload"], r["ring"])].append(r["mem_mean"])
    for r in rows:
        if r.get("kind") == "tuned" and r.get("config") == "right-size":
            m = max_mem.get((r["workload"], r["max_ring"]))
            r["_max_mem"] = sum(m) / len(m) if m else 0
    print("\n".join(give_back(rows) + settle(rows) + right_size(rows, good)))


if __name__ == "__main__":
    main()
