"""The code layout of a kernel, and its instructions by latency class, from Nsight Compute's per-instruction counts (the SourceCounters page as CSV, as
research/scripts/ncu_sdpa_sass.sh writes it): how many KiB of SASS every warp executes once, how many only some warps
execute once, and how many more than once (loops), 16 bytes an instruction. What perfmodel/kernels/sdpa.py's
SDPAFlash.CODE_KIB holds for flash's causal instantiations; tests/model/test_fetch.py checks the table against the
committed listings. ``classes`` sorts a kernel's executed instructions per warp by what a dependent one waits for
(SDPAFlash.COMBINE_CLASSES, the split-KV combine's chain; tests/kernels/test_sdpa_presets.py).

    python3 research/scripts/flash_layout.py research/data/h100/flash_sass/sdpa_sass.tar.gz
"""
import collections
import csv
import io
import re
import sys
import tarfile

INSTRUCTION_BYTES = 16


def layout(lines, warps=None) -> dict:
    """{"once_all", "once_some", "loop", "never", "warps", "once_instructions_per_warp"} from the CSV's lines:
    KiB of code executed once by every warp, by some warps, by warps more than once on average, never. ``warps``:
    the launch's warps (by default, the largest count any instruction was executed, at most once per warp: the
    kernel's first instruction)."""
    head, body = listing_rows(lines)
    col = head.index("Instructions Executed")
    counts = [int(r[col].replace(",", "")) for r in body]
    w = warps or counts[0]
    kib = lambda n: n * INSTRUCTION_BYTES / 1024
    return {"once_all": kib(sum(c == w for c in counts)), "once_some": kib(sum(0 < c < w for c in counts)),
            "loop": kib(sum(c > w for c in counts)), "never": kib(sum(c == 0 for c in counts)), "warps": w,
            "once_instructions_per_warp": sum(c for c in counts if c <= w) / w}


# opcode -> latency class: "sfu" (MUFU and the integer/float conversions, variable latency through the same
# scoreboards), "smem" (shared loads and stores, shuffles), "const" (LDC: a constant-cache load), "gload"
# (global loads), "sync" (barriers); everything else is "alu" (fixed latency: integer, FP32, control, uniform)
CLASSES = {"MUFU": "sfu", "I2F": "sfu", "F2I": "sfu", "I2FP": "sfu", "F2IP": "sfu", "F2F": "sfu",
           "LDS": "smem", "STS": "smem", "SHFL": "smem", "LDSM": "smem", "LDC": "const", "LDG": "gload",
           "BAR": "sync"}


def listing_rows(lines):
    """(header, instruction rows) of a SourceCounters CSV's lines: the header is the row that opens with "Address",
    an instruction row one whose address is hex."""
    rows = list(csv.reader(lines))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    return rows[head], [r for r in rows[head + 1:] if r and r[0].startswith("0x")]


def opcode(row) -> str:
    """The opcode of an instruction row (listing_rows), predicate and modifiers aside ("" for an empty one)."""
    words = re.sub(r"^@!?U?P\w+\s+", "", row[1].strip()).split()
    return words[0].split(".")[0] if words else ""


def classes(lines, warps) -> dict:
    """Executed instructions per warp by latency class (CLASSES), from the CSV's lines, over ``warps``."""
    head, body = listing_rows(lines)
    col = head.index("Instructions Executed")
    out = collections.Counter()
    for r in body:
        op = opcode(r)
        if op:
            out[CLASSES.get(op, "alu")] += int(r[col].replace(",", ""))
    return {k: v / warps for k, v in sorted(out.items())}


def listings(tar_path, prefix="sass_") -> dict:
    """tag -> the text of every <prefix><tag>.csv in a tarball of ncu_sdpa_sass.sh or ncu_tc_sass.sh (``prefix``
    "details_": their details pages)."""
    out = {}
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name.startswith(prefix) and name.endswith(".csv"):
                out[name[len(prefix):-4]] = tar.extractfile(m).read().decode()
    return out


def layouts(tar_path) -> dict:
    """tag -> layout of every listing in a tarball of ncu_sdpa_sass.sh."""
    return {tag: layout(io.StringIO(text)) for tag, text in listings(tar_path).items()}


if __name__ == "__main__":
    for path in sys.argv[1:]:
        for tag, lay in sorted(layouts(path).items()):
            print(f"{tag:24s} once (all warps) {lay['once_all']:6.2f} KiB  once (some) {lay['once_some']:6.2f} KiB  "
                  f"loop {lay['loop']:6.2f} KiB  never {lay['never']:5.2f} KiB  "
                  f"once-run instructions per warp {lay['once_instructions_per_warp']:7.1f}")
            text = listings(path)[tag]
            per_warp = classes(io.StringIO(text), lay["warps"])
            print(f"{'':24s} per warp by class: " + ", ".join(f"{k} {v:.2f}" for k, v in per_warp.items()))
