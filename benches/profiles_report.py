#!/usr/bin/env python3
"""One static sweep per host profile, side by side (BENCHMARKS §3.P).

    benches/profiles_report.py NAME.jsonl...   > TABLE.md

Each file is one `benches/wire-outcome.sh --profile P` run (its meta line
names the profile). Per workload and profile: the figure (MB delivered per
10^9 busy guest instructions) at each ring, mean [range] over the rounds;
the pooled 2 sigma and the best static ring by the figure, both by
wire_report's rule (one rule, one place); the share of returns freed at the
smallest ring; and whether the smallest ring and the smallest ring that
frees nothing (`ring_full` 0 in every round) are told apart: their means
differ by more than 2 sigma.
"""
import sys

from wire_report import MIB, best_static, fmt_range, load, mean, noise, sweep

KEY = "mb_per_gi"


def runs(paths):
    out = []
    for p in paths:
        meta, _, rows = load(p)
        out.append((meta.get("profile") or "free", rows))
    return out


def workloads(rows):
    return sorted({r["workload"] for r in rows if r["kind"] == "static"})


def main():
    rs = runs(sys.argv[1:])
    for wl in sorted({w for _, rows in rs for w in workloads(rows)}):
        by_profile = [(prof, sweep(rows, wl)) for prof, rows in rs]
        by_profile = [(p, by) for p, by in by_profile if by]
        rings = sorted({ring for _, by in by_profile for ring in by})
        print(f"### {wl}\n")
        print("| profile | " + " | ".join(f"ring {r}" for r in rings)
              + " | 2σ | best static (figure) | freed at the smallest ring | smallest ring freeing nothing | told apart |")
        print("|---|" + "---|" * len(rings) + "---|---|---|---|---|")
        for prof, by in by_profile:
            cells = [fmt_range(by[r], KEY, "{:.1f}") if r in by else "–" for r in rings]
            tol = 2 * noise(by, KEY)
            _, _, best, means = best_static(by, KEY, True)
            first = min(by)
            freed = mean([r["ring_full_share"] for r in by[first]])
            clear = [r for r in sorted(by) if all(x["ring_full_per_k"] == 0 for x in by[r])]
            if clear:
                c = clear[0]
                gap = means[c] - means[first]
                apart = f"{gap:+.1f} ({'yes' if abs(gap) > tol else 'no'})"
                mem = mean([x["mem_mean"] for x in by[c]]) / MIB
                clear_cell = f"{c} ({mem:.1f} MiB)"
            else:
                apart, clear_cell = "–", "none"
            print(f"| {prof} | " + " | ".join(cells)
                  + f" | {tol:.1f} | {best} | {freed:.0%} | {clear_cell} | {apart} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
