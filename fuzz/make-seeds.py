#!/usr/bin/env python3
"""Builds fuzz/seeds/<target>/ from the recorded kernel bytes under
netlink/tests/fixtures/ and the shipped policy files. Rerun after adding
fixtures; the output is committed (fuzz/README.md)."""
import pathlib
import shutil
import struct

root = pathlib.Path(__file__).resolve().parent.parent
fx = root / "netlink/tests/fixtures"
out = root / "fuzz/seeds"
# Only the targets built here: seeds/recording holds recordings written by
# `pptune record` (fuzz/README.md), not derived from the fixtures.
for t in ("netdev", "ethtool", "ctrl", "rtnetlink", "extack", "notifications", "policy"):
    shutil.rmtree(out / t, ignore_errors=True)


def put(target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)


def messages(data):
    """Split a stream of netlink messages (nlmsghdr: len u32, type u16, ...)."""
    while len(data) >= 16:
        n = struct.unpack_from("<I", data)[0]
        if n < 16 or n > len(data):
            return
        yield data[:n]
        data = data[(n + 3) & ~3:]


for f in sorted(fx.glob("*.bin")):
    if f.name.endswith(".req.bin"):
        continue
    stem = f.name[: -len(".bin")]
    data = f.read_bytes()
    req = fx / f"{stem}.req.bin"
    reqb = req.read_bytes() if req.exists() else b""
    family = next((t for t in ("netdev", "ethtool", "ctrl", "rtnl") if f"-{t}-" in f.name), None)
    target = {"rtnl": "rtnetlink"}.get(family, family)
    if target:
        # The whole reply stream, and each message's generic payload
        # (after nlmsghdr) for the payload decoders.
        put(target, stem, data)
        for i, m in enumerate(messages(data)):
            put(target, f"{stem}.payload{i}", m[16:])
    if reqb and ("refused" in stem or "missing" in stem or "-ack" in stem):
        put("extack", stem, struct.pack("<H", len(reqb)) + reqb + data)
    if "-ntf" in stem:
        for i, m in enumerate(messages(data)):
            kind = struct.unpack_from("<H", m, 4)[0]
            source = 0 if family == "netdev" else 1
            put("notifications", f"{stem}.{i}", bytes([source]) + struct.pack("<H", kind) + m)
    if family == "rtnl":
        for i, m in enumerate(messages(data)):
            put("notifications", f"{stem}.{i}", bytes([2, 0, 0]) + m)

for p in [root / "config/src/default.yaml", *sorted((root / "config/examples").glob("*.yaml")),
          *sorted((root / "tests/policies").glob("*.yaml"))]:
    put("policy", p.name, p.read_bytes())
# A policy.yaml plus a drop-in, as the target splits them.
put("policy", "with-drop-in.yaml",
    (root / "config/examples/enforce-rings.yaml").read_bytes() + b"\n#---\nrings:\n  max: 4096\n")

for t in sorted(out.iterdir()):
    print(f"{t.name}: {len(list(t.iterdir()))} seeds")
