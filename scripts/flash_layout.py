"""The code layout of a kernel from Nsight Compute's per-instruction counts (the SourceCounters page as CSV, as
scripts/ncu_sdpa_sass.sh writes it): how many KiB of SASS every warp executes once, how many only some warps
execute once, and how many more than once (loops), 16 bytes an instruction. What perfmodel/kernels/sdpa.py's
SDPAFlash.CODE_KIB holds for flash's causal instantiations; tests/test_fetch.py checks the table against the
committed listings.

    python3 scripts/flash_layout.py examples/measurements/h100/flash_sass/sdpa_sass.tar.gz
"""
import csv
import io
import sys
import tarfile

INSTRUCTION_BYTES = 16


def layout(lines, warps=None) -> dict:
    """{"once_all", "once_some", "loop", "never", "warps", "once_instructions_per_warp"} from the CSV's lines:
    KiB of code executed once by every warp, by some warps, by warps more than once on average, never. ``warps``:
    the launch's warps (by default, the largest count any instruction was executed, at most once per warp: the
    kernel's first instruction)."""
    rows = list(csv.reader(lines))
    head = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    col = rows[head].index("Instructions Executed")
    counts = [int(r[col].replace(",", "")) for r in rows[head + 1:] if r and r[0].startswith("0x")]
    w = warps or counts[0]
    kib = lambda n: n * INSTRUCTION_BYTES / 1024
    return {"once_all": kib(sum(c == w for c in counts)), "once_some": kib(sum(0 < c < w for c in counts)),
            "loop": kib(sum(c > w for c in counts)), "never": kib(sum(c == 0 for c in counts)), "warps": w,
            "once_instructions_per_warp": sum(c for c in counts if c <= w) / w}


def layouts(tar_path) -> dict:
    """tag -> layout of every sass_<tag>.csv in a tarball of ncu_sdpa_sass.sh."""
    out = {}
    with tarfile.open(tar_path) as tar:
        for m in tar.getmembers():
            name = m.name.rsplit("/", 1)[-1]
            if name.startswith("sass_") and name.endswith(".csv"):
                text = tar.extractfile(m).read().decode()
                out[name[5:-4]] = layout(io.StringIO(text))
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        for tag, lay in sorted(layouts(path).items()):
            print(f"{tag:24s} once (all warps) {lay['once_all']:6.2f} KiB  once (some) {lay['once_some']:6.2f} KiB  "
                  f"loop {lay['loop']:6.2f} KiB  never {lay['never']:5.2f} KiB  "
                  f"once-run instructions per warp {lay['once_instructions_per_warp']:7.1f}")
