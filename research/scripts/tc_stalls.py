"""Where fa2_tc's warps spend a KV tile, from Nsight Compute's per-instruction warp-stall samples
(research/scripts/ncu_tc_sass.sh -> research/data/h100/tc_sass/tc_sass.tar.gz): each launch's elapsed cycles per KV
tile of its busiest SM, split by stall reason in proportion to the samples (every SM's: in a causal launch the
mean block's mix, applied to the longest block's tiles). In lone blocks (B=1 H=1: one block per
SM) the long-scoreboard share is the block's wait on its K and V tile loads (cp.async.wait_group: the sample falls
on the instruction after the wait), a barrier share its warps' skew at __syncthreads, "wait" fixed-latency
dependencies (mostly HMMA after HMMA), "selected" the cycles a warp issues.

    python3 research/scripts/tc_stalls.py research/data/h100/tc_sass/tc_sass.tar.gz [OUT.json]
"""
import csv
import io
import json
import re
import sys

import flash_layout
from flash_layout import listing_rows, listings

SMS = 132          # the H100 SXM's SMs (the launches were profiled there)
# tag -> (B, H, N, d, causal, Br, Bc, warps): what research/scripts/ncu_tc_sass.sh profiles by default
TAG = re.compile(r"(?P<kind>lone|full)_(?P<causal>causal_)?d(?P<d>\d+)_(?P<Br>\d+)x(?P<Bc>\d+)w(?P<w>\d+)$")


def config(tag):
    """The launch a default tag names (TAG), None for another tag."""
    m = TAG.match(tag)
    if m is None:
        return None
    lone = m["kind"] == "lone"
    return {"B": 1 if lone else 32, "H": 1 if lone else 16, "N": 8192 if lone else 2048, "d": int(m["d"]),
            "causal": bool(m["causal"]), "Br": int(m["Br"]), "Bc": int(m["Bc"]), "warps": int(m["w"])}


def busiest_sm_tiles(c):
    """KV tiles the busiest SM walks: blocks of one SM one after another (lone: one block, the longest: a causal
    launch's last Q tile sees every key), else the launch's tiles spread evenly over the SMs."""
    tiles = -(-c["N"] // c["Bc"])
    blocks = c["B"] * c["H"] * -(-c["N"] // c["Br"])
    return tiles if blocks <= SMS else blocks * tiles / SMS


def stalls(sass_text, opcode=None) -> dict:
    """Samples by stall reason, summed over the listing's instructions (``opcode``: only those of that opcode,
    e.g. "HMMA", predicates and modifiers aside; the sample falls on the instruction that waits)."""
    head, body = listing_rows(io.StringIO(sass_text))
    cols = {h: i for i, h in enumerate(head) if h.startswith("stall_") and "Not Issued" not in h}
    out = dict.fromkeys((h[len("stall_"):] for h in cols), 0)
    for r in body:
        if opcode is not None and flash_layout.opcode(r) != opcode:
            continue
        for h, i in cols.items():
            out[h[len("stall_"):]] += int(r[i].replace(",", "") or 0)
    return out


def elapsed_cycles(details_text) -> float:
    for r in csv.DictReader(io.StringIO(details_text)):
        if r["Metric Name"] == "Elapsed Cycles":
            return float(r["Metric Value"].replace(",", ""))
    raise ValueError("no Elapsed Cycles in the details page")


def per_tile(tar_path) -> dict:
    """tag -> {"config", "cycles_per_tile", "stall_cycles_per_tile": {reason: cycles}}."""
    sass, details = listings(tar_path), listings(tar_path, "details_")
    out = {}
    for tag in sorted(sass):
        c = config(tag)
        if c is None:               # a SPEC of one's own: its shape is not in its name
            print(f"skipped {tag}: not one of research/scripts/ncu_tc_sass.sh's default launches", file=sys.stderr)
            continue
        per = elapsed_cycles(details[tag]) / busiest_sm_tiles(c)
        s = stalls(sass[tag])
        total = sum(s.values())
        out[tag] = {"config": c, "cycles_per_tile": per,
                    "stall_cycles_per_tile": {k: per * v / total for k, v in sorted(s.items()) if v}}
    return out


if __name__ == "__main__":
    result = per_tile(sys.argv[1])
    for tag, r in result.items():
        s = r["stall_cycles_per_tile"]
        print(f"{tag:28s} cycles/tile {r['cycles_per_tile']:7.0f}  " + "  ".join(
            f"{k} {s.get(k, 0):5.0f}" for k in ("long_sb", "barrier", "wait", "short_sb", "mio", "math", "selected")))
    if len(sys.argv) > 2:
        json.dump({"source": sys.argv[1], "command": "python3 research/scripts/tc_stalls.py " + " ".join(sys.argv[1:]),
                   "launches": result}, open(sys.argv[2], "w"), indent=1)
