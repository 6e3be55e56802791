"""Generated bad and edge inputs for every command: each ends in exit 2 with exactly one line on stderr, or exit 0
with finite, positive, valid JSON. Never a traceback, never NaN or Infinity, never a hang."""

import json
import math

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings, strategies as st

from perfmodel.cli import main

NUMBERS = st.one_of(
    st.integers(min_value=-5, max_value=300).map(str),
    st.sampled_from(["0", "-1", "1e12", "1.5", "32.0", "abc", "", " ", "nan", "inf", "9223372036854775808",
                     str(2 ** 31), "0x20", "1_000", "٣", "64,", ",", "1:10:x1", "16:8:2", "1:100000000:1"]),
)
KERNELS = st.sampled_from(["fa1", "fa2", "fa2_tc", "sdpa-flash", "sdpa-cudnn", "fa3", ""])
GPUS = st.sampled_from(["h100", "h200", "rtx3090", "a100", "gtx1080", "h100-pcie", "v100", "/nonexistent.yaml",
                        "tests/data/snapshot_predictions.json", "README.md"])
DTYPES = st.sampled_from(["fp32", "fp16", "bf16", "fp8", "FP16"])
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))


def _check(args):
    r = CliRunner().invoke(main, args)
    out, err = r.stdout, r.stderr
    assert r.exit_code in (0, 2), (args, r.exit_code, r.output[-500:])
    assert "Traceback" not in r.output, (args, r.output[-800:])
    if r.exit_code == 2:
        lines = [l for l in err.splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, err)
        return None
    if "--json" in args:
        data = json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(AssertionError(c)))
        return data
    return out


def _opts(**kw):
    out = []
    for k, v in kw.items():
        if v is not None:
            out += [f"--{k}", v]
    return out


@SETTINGS
@given(gpu=GPUS, kernel=KERNELS, N=NUMBERS, d=NUMBERS, Br=st.one_of(st.none(), NUMBERS),
       Bc=st.one_of(st.none(), NUMBERS), threads=st.one_of(st.none(), NUMBERS), warps=st.one_of(st.none(), NUMBERS),
       dtype=DTYPES, causal=st.booleans(), regs=st.one_of(st.none(), NUMBERS))
def test_predict_never_fails_badly(gpu, kernel, N, d, Br, Bc, threads, warps, dtype, causal, regs):
    args = ["predict", "--gpu", gpu, "--kernel", kernel, "--json"] + _opts(N=N, d=d, Br=Br, Bc=Bc, threads=threads,
                                                                             warps=warps, dtype=dtype, regs=regs)
    data = _check(args + (["--causal"] if causal else []))
    if data is not None:
        assert math.isfinite(data["time_s"]) and data["time_s"] > 0
        assert all(v is not None and v >= 0 for v in data["times_s"].values())


@SETTINGS
@given(gpu=GPUS, kernel=KERNELS, N=NUMBERS, Br=NUMBERS, Bc=st.one_of(st.none(), NUMBERS), best=st.booleans(),
       limit=st.one_of(st.none(), NUMBERS), dtype=DTYPES)
def test_sweep_never_fails_badly(gpu, kernel, N, Br, Bc, best, limit, dtype):
    args = ["sweep", "--gpu", gpu, "--kernel", kernel, "--json"] + _opts(N=N, Br=Br, Bc=Bc, limit=limit, dtype=dtype)
    data = _check(args + (["--best"] if best else []))
    if data is not None:
        assert all(math.isfinite(r["time_s"]) and r["time_s"] > 0 for r in data["rows"])


CSV_HEAD = "kernel,B,H,N,d,Br,Bc,threads,pad,dtype,causal,median_ms,gpu_name,regs_per_thread\n"
CELLS = st.sampled_from(["1", "4", "64", "128", "0", "-3", "abc", "", "32.0", "NaN", "inf", "1e400",
                         "9223372036854775808", "fp16", "fp32", "1", "0"])


@SETTINGS
@given(cells=st.lists(st.lists(CELLS, min_size=12, max_size=15), min_size=0, max_size=4),
       kernel=st.sampled_from(["fa1", "fa2", "fa2_tc", "nope"]), worst=st.sampled_from(["0", "3", "-1", "x"]))
def test_validate_never_fails_badly(tmp_path_factory, cells, kernel, worst):
    p = tmp_path_factory.mktemp("v") / "m.csv"
    body = "".join(",".join([kernel] + row) + "\n" for row in cells)
    p.write_text(CSV_HEAD + body)
    _check(["validate", str(p), "--json", "--worst", worst, "--split", "all"])


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.one_of(st.text(max_size=200), st.sampled_from(["a: &a [1]\nb: [*a, *a]\n", "[" * 5000, "name: .nan\n",
                                                               "sm_count: 1000000000000000000000000000000\n"])),
       binary=st.binary(max_size=64))
def test_spec_files_never_fail_badly(tmp_path_factory, text, binary):
    d = tmp_path_factory.mktemp("g")
    (d / "t.yaml").write_text(text)
    (d / "b.yaml").write_bytes(binary)
    for f in ("t.yaml", "b.yaml"):
        _check(["gpus", "show", str(d / f)])
        _check(["predict", "--gpu", str(d / f), "--N", "64", "--Br", "16", "--Bc", "16", "--json"])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(gpu=GPUS, kernel=KERNELS, N=NUMBERS, Br=st.one_of(st.none(), NUMBERS), dtype=DTYPES,
       out=st.sampled_from(["r.png", "r.jpg", "", "missing/r.png", ".", "r.svg"]),
       measured=st.sampled_from([None, "examples/measurements/h100/fa2.csv", "README.md", "/nonexistent.csv"]))
def test_roofline_never_fails_badly(tmp_path_factory, gpu, kernel, N, Br, dtype, out, measured):
    d = tmp_path_factory.mktemp("r")
    args = ["roofline", "--gpu", gpu, "--kernel", kernel, "-o", str(d / out) if out else ""] + \
        _opts(N=N, Br=Br, dtype=dtype, measured=measured)
    _check(args)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(kernel=KERNELS, cal=st.sampled_from(["values: {}\n", "values: {path_cycles: 5}\n", "[]\n", "values: {}\npath_fits: [1]\n",
                                             "values: {dram_bw_bps: .inf}\n", "\xff"]),
       from_=st.booleans())
def test_fit_never_fails_badly(tmp_path_factory, kernel, cal, from_):
    d = tmp_path_factory.mktemp("f")
    p = d / "c.yaml"
    p.write_text(cal)
    if from_:
        args = ["fit", "--from", "gpus/calibration/h100-sxm.yaml", "--kernel", kernel, "--calibration", str(p)]
    else:
        args = ["fit", "examples/measurements/h100/smoke/smoke-fa1.csv", "--kernel", kernel, "--calibration", str(p)]
    _check(args)
