#!/usr/bin/env python3
"""Cost of a whole process, as an operator would run it.

    proc_cost.py --label NAME --runs R [--pools N] -- CMD ARGS...

Runs CMD R times (stdout to /dev/null) and prints one JSON line: CPU time
(user + system from wait4, microsecond resolution), wall time (spawn to
reap) and peak RSS, medians per run. Standard library only: it runs inside
the test VM. A failing run prints its stderr and an "error" field.

CMD runs under GNU time (`/usr/bin/time -f %M`), which forks it, only for the
peak RSS: a child forked or vforked straight from this Python process would
report Python's own resident set as its ru_maxrss (the kernel keeps the
pre-exec high-water mark). The CPU figure therefore includes GNU time's own
start-up (measured: ~1 ms in the VM; see the `baseline` row that
observe-cost.sh records with CMD = `true`).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--label", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pools", type=int, default=0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    cpu, wall, rss = [], [], []
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as rssf:
        cmd = ["/usr/bin/time", "-f", "%M", "-o", rssf.name] + cmd
        for _ in range(a.runs):
            err.seek(0)
            err.truncate()
            t0 = time.monotonic()
            pid = os.posix_spawnp(cmd[0], cmd, os.environ, file_actions=[
                (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                (os.POSIX_SPAWN_DUP2, err.fileno(), 2),
            ])
            _, status, ru = os.wait4(pid, 0)
            t1 = time.monotonic()
            code = os.waitstatus_to_exitcode(status)
            if code != 0:
                err.seek(0)
                sys.stderr.write(err.read().decode(errors="replace")[-2000:])
                print(json.dumps({"tool": a.label, "pools": a.pools, "error": code}))
                return 1
            cpu.append(ru.ru_utime + ru.ru_stime)
            wall.append(t1 - t0)
            rssf.seek(0)
            rss.append(int(rssf.read().split()[-1]))
    med = statistics.median
    print(json.dumps({
        "tool": a.label,
        "pools": a.pools,
        "runs": a.runs,
        "cpu_ms_per_run": round(med(cpu) * 1e3, 2),
        "cpu_ms_min": round(min(cpu) * 1e3, 2),
        "wall_ms_per_run": round(med(wall) * 1e3, 2),
        "maxrss_kib": int(max(rss)),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
