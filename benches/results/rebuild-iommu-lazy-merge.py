# How benches/results/rebuild-iommu-lazy.jsonl and -run.json were made (BENCHMARKS §3.R3); run from the repository root after copying the three runs there.
# One-off: BENCHMARKS §3.R3's rows from the whole run (cut off by the VM
# limit in udp's passes 1 and 2) and the two re-runs of those passes' tuners.
import json, sys
R = "benches/results/"
whole = [json.loads(l) for l in open(R + "rebuild-iommu-lazy-whole.jsonl")]
out, cut = [], False
for i, r in enumerate(whole):
    if r["kind"] == "meta":
        nxt = whole[i + 1] if i + 1 < len(whole) else {}
        cut = nxt.get("workload") == "udp" and r.get("passes") in ([1], [2])
    # udp passes 1 and 2 were cut off: keep their static rounds (complete),
    # drop their tuned rows (the re-runs have every tuner) and their
    # meta/workload lines (no kernel check line closes them).
    if cut and r["kind"] in ("meta", "workload", "tuned"):
        continue
    out.append(r)
for n in (1, 2):
    out += [json.loads(l) for l in open(R + f"lazy-udp-p{n}.jsonl")]
with open(R + "rebuild-iommu-lazy.jsonl", "w") as f:
    for r in out:
        f.write(json.dumps(r) + "\n")
parts = [dict(json.load(open(R + "rebuild-iommu-lazy-whole-run.json")), name="rebuild-iommu-lazy-whole (udp's passes 1-2 cut off at 6,000 s: their static rounds kept, their tuners re-run below)")]
parts += [dict(json.load(open(R + f"lazy-udp-p{n}-run.json")), name=f"lazy-udp-p{n} (udp pass {n}'s tuners)") for n in (1, 2)]
json.dump({"git": "2730e77d", "profile": "iommu-lazy", "parts": parts}, open(R + "rebuild-iommu-lazy-run.json", "w"))
