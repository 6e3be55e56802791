"""Regenerate every accuracy table in the documentation from the recorded figures.

    python examples/accuracy_tables.py            # rewrite the tables in place
    python examples/accuracy_tables.py --check    # exit 1 if any table is out of date

Sources (none is re-measured or re-predicted here; each is written by the command named beside it):

* examples/accuracy.json: `perfmodel validate` on the committed datasets (research/scripts/record_accuracy.sh)
* examples/benchmarks/offgrid_tc.json: the off-grid sets (examples/offgrid_tc.py)
* examples/benchmarks/tile_advice_fa2_tc.json: fa2_tc's tile advice (examples/tile_advice.py)
* research/data/benchmarks/repeatability_fa2_tc.json: two timing runs of one grid (research/scripts/repeatability.py)
* examples/benchmarks/workloads.json: the H200's inference and training datasets by workload (examples/workloads.py)
* examples/benchmarks/published_fa2.json: published FlashAttention-2 figures, A100 and H100 (examples/published_fa2.py)

Each table lies between `<!-- accuracy:begin NAME -->` and `<!-- accuracy:end NAME -->` in the files of TARGETS;
everything outside the markers is left as written. Files are replaced atomically (a temporary file in the same
folder, flushed and fsynced, then renamed over the old one). Exit codes: 0 done or up to date, 1 out of date
(--check), 2 bad input (a missing source, a marker without its end, an unknown table name).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("README.md", "docs/accuracy.md")
SOURCES = {
    "accuracy": "examples/accuracy.json",
    "offgrid": "examples/benchmarks/offgrid_tc.json",
    "advice": "examples/benchmarks/tile_advice_fa2_tc.json",
    "repeat": "research/data/benchmarks/repeatability_fa2_tc.json",
    "workloads": "examples/benchmarks/workloads.json",
    "published": "examples/benchmarks/published_fa2.json",
}
MARKER = re.compile(r"<!-- accuracy:begin ([\w-]+) -->\n(.*?)<!-- accuracy:end ([\w-]+) -->", re.S)
GPU = {"h100-sxm": "H100", "h100": "H100", "h200": "H200"}
TC_KERNELS = ("fa2_tc", "sdpa-flash", "sdpa-cudnn")


class BadInput(Exception):
    pass


# ---- formatting -------------------------------------------------------------------------------------------------

def pct(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}%" if abs(x) >= 1000 else f"{x:.{digits}f}%"


def rho(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def share(x: float) -> str:
    return f"{100 * x:.1f}%"


def rows_of(s: dict) -> str:
    return f"{s['n']} held out" if s["split"] == "test" else f"{s['n']} (all)"


def table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = [header, rule, *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines) + "\n"


# ---- the tables -------------------------------------------------------------------------------------------------

def summary(src: dict) -> str:
    """README: one row per kernel, the H100 beside the H200."""
    a = src["accuracy"]
    pairs = {"fa1": (a["fitted"]["fa1"], a["h200_all_rows"]["fa1"]),
             "fa2": (a["fitted"]["fa2"], a["h200_all_rows"]["fa2"])}
    for k in TC_KERNELS:
        pairs[k] = (a["tensor_core"][f"{k}/h100-sxm"], a["tensor_core"][f"{k}/h200"])
    rows = []
    for k, (h100, h200) in pairs.items():
        rows.append([f"`{k}`", f"{rows_of(h100)} / {rows_of(h200)}", f"{pct(h100['mape'])} / {pct(h200['mape'])}",
                     f"{pct(h100['max_ape'])} / {pct(h200['max_ape'])}",
                     f"{rho(h100['spearman'])} / {rho(h200['spearman'])}"])
    return table(["kernel", "rows scored, H100 / H200", "mean error", "worst row", "Spearman over tiles"], rows)


FP32_GROUPS = (
    ("fitted", "probe + fitted path costs"),
    ("probe_only", "probe only (`--no-fits`)"),
    ("h200_all_rows", "its probe + the H100's fits"),
    ("h200_spec_and_sm_90_constants", "spec + sm_90 (`--no-calibration`)"),
)


def fp32(src: dict) -> str:
    a = src["accuracy"]
    rows = []
    for kernel in ("fa1", "fa2"):
        for group, label in FP32_GROUPS:
            s = a[group][kernel]
            rows.append([f"`{kernel}`", GPU[s["gpu"]], rows_of(s), label, pct(s["mape"]), pct(s["median_ape"]),
                         pct(s["max_ape"]), rho(s["spearman"]), pct(s["seed_mape"]), rho(s["seed_spearman"])])
    return table(["kernel", "GPU", "rows", "constants", "mean error", "median", "worst", "Spearman",
                  "seed model", "seed Spearman"], rows, "llllrrrrrr")


TC_FITTED = {
    "fa2_tc/h100-sxm": "path costs, on its training split",
    "fa2_tc/h200": "nothing on H200 data",
    "sdpa-flash/h100-sxm": "nothing (fa2_tc's path costs)",
    "sdpa-flash/h200": "nothing (fa2_tc's path costs)",
    "sdpa-cudnn/h100-sxm": "nothing",
    "sdpa-cudnn/h200": "nothing",
}


def tensor_core(src: dict) -> str:
    tc = src["accuracy"]["tensor_core"]
    rows = []
    for kernel in TC_KERNELS:
        for gpu in ("h100-sxm", "h200"):
            key = f"{kernel}/{gpu}"
            s = tc[key]
            rows.append([f"`{kernel}`", GPU[gpu], rows_of(s), pct(s["mape"]), pct(s["median_ape"]),
                         pct(s["max_ape"]), rho(s["spearman"]), pct(s["roofline_mape"]),
                         TC_FITTED.get(key, "see accuracy.json")])
    return table(["kernel", "GPU", "rows", "mean error", "median", "worst", "Spearman", "plain roofline",
                  "fitted to its timings"], rows, "lllrrrrrl")


def offgrid(src: dict) -> str:
    o = src["offgrid"]
    sets = sorted({1} | {int(m.group(1)) for k in o if (m := re.match(r"offgrid(\d+)/", k))})
    rows = []
    for n in sets:
        prefix = "" if n == 1 else f"offgrid{n}/"
        for gpu in ("h100", "h200"):
            t = o[f"{prefix}fa2_tc/{gpu}"]
            fl, cu = o[f"{prefix}sdpa-flash/{gpu}"], o[f"{prefix}sdpa-cudnn/{gpu}"]
            rows.append([str(n), GPU[gpu], str(t["problems"]), pct(t["mape"]), pct(t["max_ape"]), rho(t["spearman"]),
                         share(t["predicted_best_is_measured_best"] / t["problems"]), share(t["within_5_percent"]),
                         pct(fl["mape"]), pct(cu["mape"])])
    return table(["set", "GPU", "problems", "fa2_tc error", "worst", "Spearman", "pick is best", "pick within 5%",
                  "flash error", "cuDNN error"], rows, "llrrrrrrrr")


def advice(src: dict) -> str:
    a = src["advice"]
    rows = []
    for gpu in ("h100", "h200"):
        s = a[gpu]
        t = s["top_two"]
        rows.append([GPU[gpu], str(s["problems"]), share(s["share"]), share(s["within_5_percent"]),
                     f"{100 * s['slowdown_of_predicted_best_worst']:.1f}% slower", share(t["holds_measured_best"]),
                     share(t["random_pair_holds_best"])])
    return table(["GPU", "problems", "pick is best", "pick within 5%", "worst pick", "pick or runner-up is best",
                  "two random tiles are"], rows, "lrrrrrr")


def margins(src: dict) -> str:
    a = src["advice"]
    edges = [100 * e for e in a["margin_edges"]]
    labels = [f"below {edges[0]:g}%"] + [f"{lo:g}–{hi:g}%" for lo, hi in zip(edges, edges[1:])]
    labels.append(f"{edges[-1]:g}% or more")
    cols = (a["h100"]["pick_best_by_margin"], a["h200"]["pick_best_by_margin"], a["offgrid_1_5_pick_best_by_margin"])
    rows = [[label, *(f"{100 * c[i][0]:.0f}% of {c[i][1]}" for c in cols)] for i, label in enumerate(labels)]
    return table(["predicted margin to the runner-up", "H100", "H200", "off-grid sets 1–5"], rows)


def repeat(src: dict) -> str:
    r = src["repeat"]
    d, m = r["second_over_first"], r["second_run_as_model"]
    rows = [["second run, scored against the first", str(r["rows_in_both"]), pct(d["mean_abs_pct"], 2),
             pct(d["median_abs_pct"], 2), pct(d["worst_abs_pct"]), rho(m["spearman"]),
             share(m["tile_advice"]["within_5_percent"])]]
    for run in ("first", "second"):
        s = r["model_held_out"][run]
        rows.append([f"model against the {run} run (held-out rows)", str(s["rows"]), pct(s["mape"], 2), "—",
                     pct(s["worst"]), rho(s["spearman"]), share(s["tile_advice_all_rows"]["within_5_percent"])])
    return table(["compared", "rows", "mean difference", "median", "worst", "Spearman", "pick within 5%"], rows)


WORKLOADS = ("decode", "grouped prefill", "cross-attention", "bwd", "fwd_bwd")


def workloads(src: dict) -> str:
    """Per workload and kernel on the H200: the model's mean (worst) error beside the naive answer's."""
    w = src["workloads"]
    rows = []
    for wl in WORKLOADS:
        cells = []
        for k in TC_KERNELS:
            v = w.get(f"{k}/{wl}")
            cells.append("—" if v is None else f"{pct(v['model']['mape'])} ({pct(v['model']['max_ape'], 0)})")
        naive = [w[f"{k}/{wl}"]["naive"]["mape"] for k in TC_KERNELS if f"{k}/{wl}" in w]
        rows.append([wl, *cells, f"{pct(min(naive), 0)}–{pct(max(naive), 0)}"])
    return table(["H200 workload", "`fa2_tc` (held out)", "`sdpa-flash`", "`sdpa-cudnn`", "naive"], rows,
                 "l" + "r" * 4)


def head_dims(src: dict) -> str:
    """The SDPA presets on the H200 by head dim: decode and prefill, the model's mean (worst) error and rows."""
    h = src["workloads"]["head_dims"]
    cell = lambda m: f"{pct(m['mape'])} ({pct(m['max_ape'], 0)}, {m['n']})" if m else "—"
    rows = [[d, *(cell(h[k].get(d, {}).get(w)) for k in TC_KERNELS[1:] for w in ("decode", "prefill"))]
            for d in sorted({d for k in TC_KERNELS[1:] for d in h[k]}, key=int)]
    return table(["d", "`sdpa-flash` decode", "`sdpa-flash` prefill", "`sdpa-cudnn` decode", "`sdpa-cudnn` prefill"],
                 rows, "l" + "r" * 4)


PUBLISHED_GPU = {"a100-80gb": "A100 80GB SXM4", "h100-sxm": "H100 SXM5"}
PUBLISHED_MODE = {"fwd": "forward", "bwd": "backward", "fwd_bwd": "forward + backward"}


def published(src: dict) -> str:
    """Per GPU and mode: the published FlashAttention-2 figures, their source, and how far SDPA flash's predictions
    lie from them (above 0: the model is faster), as predicted and with the H200's backward fit."""
    p = src["published"]
    rows = []
    for key, s in p["summary"].items():
        gpu, mode = key.split("/")
        cites = dict.fromkeys(r["source"] for r in p["rows"] if (r["gpu"], r["mode"]) == (gpu, mode))
        fit = s.get("with_h200_bwd_fit")
        rows.append([PUBLISHED_GPU[gpu], PUBLISHED_MODE[mode], str(s["n"]),
                     ", ".join(f"[{p['sources'][c]['figure']}]({p['sources'][c]['url']})" for c in cites),
                     pct(s["mean_abs_pct"]), pct(s["max_abs_pct"]), f"{s['mean_pct']:+.1f}%",
                     "—" if fit is None else f"{fit['mean_pct']:+.1f}%"])
    return table(["GPU", "mode", "figures", "source", "mean difference", "largest", "mean, signed",
                  "signed, with the H200's backward fit"], rows, "llrlrrrr")


def published_rows(src: dict) -> str:
    """Each published figure beside the prediction, TFLOP/s (published / predicted), by sequence length."""
    p = src["published"]
    cells: dict = {}
    for r in p["rows"]:
        cells.setdefault((r["gpu"], r["mode"], r["d"], r["causal"]), {})[r["N"]] = \
            f"{r['published_tflops']} / {r['predicted_tflops']:.0f}"
    seqlens = sorted({r["N"] for r in p["rows"]})
    rows = [[PUBLISHED_GPU[gpu], PUBLISHED_MODE[mode], str(d), "yes" if causal else "no",
             *(c.get(n, "—") for n in seqlens)] for (gpu, mode, d, causal), c in cells.items()]
    return table(["GPU", "mode", "d", "causal", *(f"{n // 1024}k" if n >= 1024 else str(n) for n in seqlens)], rows,
                 "llrl" + "r" * len(seqlens))


TABLES = {"summary": summary, "fp32": fp32, "tensor-core": tensor_core, "offgrid": offgrid, "advice": advice,
          "margins": margins, "repeat": repeat, "workloads": workloads, "head-dims": head_dims, "published": published,
          "published-rows": published_rows}


# ---- rewriting the files ----------------------------------------------------------------------------------------

def load_sources(root: Path) -> dict:
    out = {}
    for key, rel in SOURCES.items():
        path = root / rel
        try:
            out[key] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInput(f"{rel}: missing (written by the command its docstring names)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise BadInput(f"{rel}: cannot read it: {e}") from None
    return out


def render(text: str, src: dict, name: str) -> str:
    found = 0

    def fill(m: re.Match) -> str:
        nonlocal found
        begin, end = m.group(1), m.group(3)
        if begin != end:
            raise BadInput(f"{name}: table '{begin}' ends with the marker of '{end}'")
        if begin not in TABLES:
            raise BadInput(f"{name}: unknown table '{begin}' (known: {', '.join(TABLES)})")
        found += 1
        return f"<!-- accuracy:begin {begin} -->\n{TABLES[begin](src)}<!-- accuracy:end {begin} -->"

    try:
        new = MARKER.sub(fill, text)
    except KeyError as e:
        raise BadInput(f"{name}: the recorded figures lack {e}; rerun the command that writes them") from None
    if text.count("<!-- accuracy:begin") != found:
        raise BadInput(f"{name}: an accuracy:begin marker without its accuracy:end")
    if not found:
        raise BadInput(f"{name}: holds no accuracy table markers")
    return new


def write_atomic(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a table is out of date; write nothing")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this script's)")
    args = ap.parse_args(argv)
    try:
        src = load_sources(args.root)
        stale = []
        for rel in TARGETS:
            path = args.root / rel
            try:
                old = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise BadInput(f"{rel}: cannot read it: {e}") from None
            new = render(old, src, rel)
            if new != old:
                stale.append(rel)
                if not args.check:
                    write_atomic(path, new)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.check:
        if stale:
            print(f"out of date: {', '.join(stale)} (run python examples/accuracy_tables.py)", file=sys.stderr)
            return 1
        print("accuracy tables up to date")
        return 0
    print(f"rewrote {', '.join(stale)}" if stale else "accuracy tables already up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
