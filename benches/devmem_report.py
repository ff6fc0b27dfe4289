#!/usr/bin/env python3
"""The devmem profile's wire runs: what the dma-buf provider costs and what
the ring buys (docs/testbed.md "The devmem profile", BENCHMARKS §3.D).

    benches/devmem_report.py NAME.jsonl...   > TABLE.md

Each file is a `benches/wire-outcome.sh --profile devmem` run of the devmem
workloads. Per workload and ring, over the rounds (mean [range]):

- the figure (MB delivered per 10^9 busy guest instructions), the pooled
  2 sigma and the best static ring by wire_report's rule (one rule, one
  place);
- the provider pool's own freed share (its ring_full over its returns: the
  releases to the provider's gen_pool) and its refills from the provider
  per 1,000 frames (alloc_empty: page_pool counts no alloc_slow there);
- a provider refill's cost as ppsim timed it in B's NAPI (`mp_alloc_ns`,
  guest ns = guest instructions under --icount), mean and the longest;
- one SO_DEVMEM_DONTNEED call of 128 tokens as the receiving thread saw it
  (mean and the longest, over the whole pptraffic run): the release path
  and whatever softirq work ran inside the call when it re-enabled bottom
  halves (one vCPU: B's NAPI does);
- host memory (the header pool's pages) against all pool memory;
- with `--trace-provider`: the kernel's function_graph durations of the
  provider's two operations (`provider-trace` rows), median / p90 / max.
Then the tuned rows (max once, pptune).
"""
import sys

from wire_report import MIB, best_static, fmt_range, host_mem, load, mean, noise, sweep

KEY = "mb_per_gi"


def provider_pool(r):
    """The provider pool's counters of a row (summed if several)."""
    ps = [p for p in r.get("pools", []) if p["provider"]]
    keys = ("ring_full", "ring", "cached", "empty")
    return {k: sum(p[k] for p in ps) for k in keys}


def derived(r):
    p = provider_pool(r)
    returns = p["ring_full"] + p["ring"] + p["cached"]
    r["p_freed"] = p["ring_full"] / returns if returns else 0.0
    r["p_refills_k"] = p["empty"] * 1000 / max(r["frames"], 1)
    d = r.get("devmem_run") or {}
    r["dn_call_m"] = d.get("dontneed_ns_per_call", 0) / 1e6
    r["dn_max_m"] = d.get("dontneed_max_ns", 0) / 1e6
    r["mp_mean_k"] = (r.get("mp_alloc_ns_mean") or 0) / 1e3
    r["mp_max_k"] = (r.get("mp_alloc_max_ns") or 0) / 1e3
    r["host_mib"] = host_mem(r) / MIB
    r["mem_mib"] = r["mem_mean"] / MIB


def static(rows, wl):
    by = sweep(rows, wl)
    for rs in by.values():
        for r in rs:
            derived(r)
    tol = 2 * noise(by, KEY)
    best, _, smallest, means = best_static(by, KEY, True)
    print("| ring | MB / 10⁹ busy instr | provider pool freed | provider refills / 1000 frames "
          "| a provider refill, k instr (mean; longest) | a DONTNEED call of 128, M instr (mean; longest) "
          "| host memory (header pool), MiB | all pool memory, MiB | retrans |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ring, rs in by.items():
        print(f"| {ring} | {fmt_range(rs, KEY, '{:.1f}')} | {fmt_range(rs, 'p_freed', '{:.2f}')} "
              f"| {fmt_range(rs, 'p_refills_k', '{:.0f}')} "
              f"| {fmt_range(rs, 'mp_mean_k', '{:.1f}')}; {max(r['mp_max_k'] for r in rs):.0f} "
              f"| {fmt_range(rs, 'dn_call_m', '{:.2f}')}; {max(r['dn_max_m'] for r in rs):.0f} "
              f"| {mean([r['host_mib'] for r in rs]):.1f} | {mean([r['mem_mib'] for r in rs]):.1f} "
              f"| {fmt_range(rs, 'retrans', '{:.0f}')} |")
    first = min(by)
    print(f"\n2σ {tol:.1f}; best static by the figure {best} ({means[best]:.1f}), smallest "
          f"ring within 2σ of it **{smallest}**; ring {first} against {max(by)}: "
          f"{means[max(by)] - means[first]:+.1f}.\n")
    return means, tol


def traces(rows, wl):
    tr = [r for r in rows if r["kind"] == "provider-trace" and r["workload"] == wl]
    if not tr:
        return
    print("Provider operations, function_graph (guest instructions per call):\n")
    print("| ring | op | calls | p50 | p90 | p99 | longest |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(tr, key=lambda r: r["ring"]):
        for op, s in sorted(r["ops"].items()):
            print(f"| {r['ring']} | `{op}` | {s['n']} | {s['p50_ns']:.0f} | {s['p90_ns']:.0f} "
                  f"| {s['p99_ns']:.0f} | {s['max_ns']:.0f} |")
    print()


def tuned(rows, wl, means, tol):
    tr = [r for r in rows if r["kind"] == "tuned" and r["workload"] == wl]
    if not tr:
        return
    for r in tr:
        derived(r)
    print("| tuner | final ring | changes | first / last change (s) | MB / 10⁹ busy instr "
          "| against best static | host memory, MiB | provider pool freed |")
    print("|---|---|---|---|---|---|---|---|")
    best = max(means.values())
    for r in tr:
        print(f"| {r['config']} | {r['ring']} | {r['changes']} "
              f"| {r['first_change_s'] or 0:.0f} / {r['last_change_s']:.0f} | {r[KEY]:.1f} "
              f"| {r[KEY] - best:+.1f} ({'within' if abs(r[KEY] - best) <= tol else 'outside'} 2σ) "
              f"| {r['host_mib']:.1f} | {r['p_freed']:.2f} |")
    print()


def main():
    rows = []
    for p in sys.argv[1:]:
        rows.extend(load(p)[2])
    for wl in sorted({r["workload"] for r in rows if r["kind"] in ("static", "provider-trace")}):
        print(f"### {wl}\n")
        means, tol = static(rows, wl) if sweep(rows, wl) else ({}, 0.0)
        traces(rows, wl)
        if means:
            tuned(rows, wl, means, tol)


if __name__ == "__main__":
    main()
