# How benches/results/rebuild-distro.jsonl and -run.json were made (BENCHMARKS §3.R2); run from the repository root after copying the runs there.
# One-off: the whole distro run (19b83877; drain-pinned's pass 2 cut off by
# the VM limit after its static rings 256, 1024 and 2048) and the re-run of
# that pass whole (`--rebuild --profile distro --jobs 1 --passes 2 --
# --workloads drain-pinned`, dcea57ec binaries).
import json
R = "benches/results/"
whole = [json.loads(l) for l in open(R + "rebuild-distro-whole.jsonl")]
out, wl = [], None
for r in whole:
    if r["kind"] == "workload":
        wl = r["workload"]
    # drain-pinned's pass 2: its partial static round; the re-run has it whole.
    if wl == "drain-pinned" and r["kind"] == "static" and r.get("round") == 2:
        continue
    out.append(r)
out += [json.loads(l) for l in open(R + "rebuild-distro-p2.jsonl")]
with open(R + "rebuild-distro.jsonl", "w") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
parts = [dict(json.load(open(R + "rebuild-distro-whole-run.json")), name="rebuild-distro-whole (drain-pinned's pass 2 cut off at 6,000 s after three of its static rings: those dropped, the pass re-run below)")]
parts += [dict(json.load(open(R + "rebuild-distro-p2-run.json")), name="rebuild-distro-p2 (drain-pinned's pass 2, whole)")]
json.dump({"git": "19b83877, dcea57ec", "profile": "distro", "parts": parts}, open(R + "rebuild-distro-run.json", "w"))
