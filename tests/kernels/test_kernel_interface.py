"""The kernel interface: a kernel from one file predicts through the CLI; nothing outside perfmodel/kernels names
a kernel; fit reasons are derived; per-architecture facts fall back with a note; Spearman agrees with scipy."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import toy_kernel  # noqa: F401  (registers "toy")
from perfmodel import api
from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.kernels import REGISTRY

ROOT = Path(__file__).resolve().parents[2]


def test_a_toy_kernel_from_one_file_predicts_through_the_cli():
    r = CliRunner().invoke(main, ["predict", "--gpu", "h100", "--kernel", "toy", "--N", "1024", "--d", "64",
                                  "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["kernel"] == "toy" and d["params"]["Br"] == 64
    assert d["flops"] == 2 * 2 * 1024 * 1024 * 64 * 4        # B=1, H=4 heads
    assert d["bound"] in d["times_s"] and d["time_s"] > 0
    r = CliRunner().invoke(main, ["sweep", "--gpu", "h100", "--kernel", "toy", "--N", "512,1024", "--Br", "32,64",
                                  "--Bc", "64", "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)["rows"]) == 4


def test_a_toy_kernel_of_grouped_heads_and_two_lengths_predicts_what_it_declares():
    """The guide's toy-gqa declares grouped heads and Nq != Nk: a decode step predicts through the CLI, its counts
    follow Hkv, Nq and Nk, and a kernel that lacks them names it among the kernels that do."""
    args = ["predict", "--gpu", "h100", "--B", "2", "--H", "32", "--Hkv", "8", "--Nq", "1", "--Nk", "4096", "--d",
            "128", "--json"]
    r = CliRunner().invoke(main, args + ["--kernel", "toy-gqa"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["params"]["Hkv"] == 8 and d["params"]["Nq"] == 1 and d["params"]["Nk"] == 4096
    assert d["flops"] == 2 * 2 * 1 * 4096 * 128 * 2 * 32
    assert d["useful_flops"] == 4 * 2 * 32 * 1 * 4096 * 128
    one = api.predict("h100", "toy-gqa", B=2, H=32, Hkv=32, Nq=1, Nk=4096, d=128)
    assert one.prediction.traffic.dram_bytes > d["bytes"]["dram"]        # four times the K/V heads to read
    r = CliRunner().invoke(main, args + ["--kernel", "fa2"])
    assert r.exit_code == 2 and "toy-gqa" in r.output.strip().split("kernels that do: ")[1]
    with pytest.raises(InputError, match="H must be a multiple of Hkv"):
        api.predict("h100", "toy-gqa", H=32, Hkv=5, N=512, d=64)


def test_a_toy_kernel_of_two_launches_shows_and_adds_each():
    """The guide's toy-two runs two launches a call: each comes with its own time and bound, in the table and in
    --json, and they add to the call's time; fwd_bwd runs the forward's launches, then the backward's."""
    args = ["predict", "--gpu", "h100", "--kernel", "toy-two", "--N", "1024", "--d", "64"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and "launch 2, toy-two:second" in r.output, r.output
    d = json.loads(CliRunner().invoke(main, args + ["--json"]).stdout)
    assert [x["kernel"] for x in d["launches"]] == ["toy-two", "toy-two:second"]
    assert sum(x["time_s"] for x in d["launches"]) == pytest.approx(d["time_s"], rel=1e-6)
    assert all(x["bound"] in d["times_s"] for x in d["launches"])
    both = json.loads(CliRunner().invoke(main, args + ["--json", "--mode", "fwd_bwd"]).stdout)
    bwd = json.loads(CliRunner().invoke(main, args + ["--json", "--mode", "bwd"]).stdout)
    assert len(both["launches"]) == 4
    assert both["time_s"] == pytest.approx(d["time_s"] + bwd["time_s"], rel=1e-6)
    assert bwd["useful_flops"] == 2.5 * d["useful_flops"] and both["useful_flops"] == 3.5 * d["useful_flops"]


def test_causal_flops_are_exact_for_any_lengths():
    """Bottom-right causal: query i sees min(i + Nk - Nq + 1, Nk) keys (none below 0), summed exactly."""
    from perfmodel.shape import make_shape

    for nq, nk in ((5, 5), (1, 9), (3, 9), (9, 3), (64, 1000), (1000, 64)):
        pairs = sum(min(max(i + nk - nq + 1, 0), nk) for i in range(nq))
        s = make_shape(1, 1, None, 8, "fp16", True, Nq=nq, Nk=nk)
        assert s.forward_flops() == 4 * 8 * pairs


def test_no_module_outside_kernels_names_a_kernel():
    names = [n for n in REGISTRY if n != "toy"]
    pat = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, names)))
    offenders = []
    for p in (ROOT / "perfmodel").rglob("*.py"):
        if "kernels" in p.relative_to(ROOT / "perfmodel").parts:
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if pat.search(line.split("#")[0]):
                offenders.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_fit_reasons_are_derived_from_the_launch():
    with pytest.raises(InputError, match=r"fa2: tile Br=128, Bc=128, threads=128, pad=1, d=256 needs \d+ B"):
        api.predict("h100", "fa2", N=512, d=256, Br=128, Bc=128)
    with pytest.raises(InputError, match="fa1: 2048 threads per block"):
        api.predict("h100", "fa1", N=512, Br=2048, Bc=16)


def test_an_architecture_without_its_own_facts_says_so():
    """fa2 holds facts read off sm_80, sm_86 and sm_90 builds; Pascal takes the nearest (sm_80) and says so."""
    p = api.predict("gtx1080", "fa2", N=512, Br=32, Bc=32)
    assert any("sm_80" in n and "sm_61" in n for n in p.prediction.notes)
    for gpu in ("h100", "a100", "rtx3090"):
        assert api.predict(gpu, "fa2", N=512, Br=32, Bc=32).prediction.notes == ()


def test_python_api_types():
    p = api.predict(gpu="h100", kernel="fa2", B=4, H=16, N=4096, d=64, Br=64, Bc=64)
    assert isinstance(p.time_s, float) and isinstance(p.bound, str)
    s = api.sweep(gpu="h100", kernel="fa2", N=[1024, 4096], Br=[32, 64], Bc=[32, 64])
    assert s.time_s.shape == (1, 1, 2, 1, 2, 2, 1, 1)
    i = s.values["N"].index(4096)
    one = api.predict("h100", "fa2", N=4096, Br=64, Bc=32)
    assert s.time_s[0, 0, i, 0, 1, 0, 0, 0] == pytest.approx(one.time_s, rel=1e-6)


@pytest.mark.parametrize("call,needle", [
    (lambda: api.predict("h100", "fa2_tc", N=1024, causal="no"), "causal must be True or False, got 'no'"),
    (lambda: api.predict("h100", "fa2_tc", N=1024, causal=2), "causal must be True or False, got 2"),
    (lambda: api.sweep("h100", "fa2_tc", N=[]), "N: no values to sweep"),
    (lambda: api.sweep("h100", "fa2_tc", N=1024, causal="yes"), "causal must be True or False"),
])
def test_python_api_refuses_what_it_cannot_read(call, needle):
    """No truth value read off a string (causal="no" was causal), no IndexError for an empty axis."""
    with pytest.raises(InputError, match=needle):
        call()
    assert api.predict("h100", "fa2_tc", N=1024, causal=1).time_s == api.predict("h100", "fa2_tc", N=1024,
                                                                                causal=True).time_s


def test_spearman_agrees_with_scipy():
    stats = pytest.importorskip("scipy.stats")
    from perfmodel.evaluation.validate import spearman

    rng = np.random.default_rng(0)
    for n in (3, 5, 20, 200):
        a = rng.integers(0, 5, n).astype(float)          # ties included
        b = a + rng.normal(0, 2, n)
        assert spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)


def test_an_unknown_architecture_takes_its_own_family_first(tmp_path):
    """An architecture without a file of its own takes one of its major version first: without sm_89's file, Ada
    (sm_89) would lie nearer Hopper (sm_90) by number, but its SM is Ampere GA102's kind, so it took sm_86's. A GPU
    file of compute capability 8.7 (Orin) takes sm_86's architecture constants and fa2's sm_86 facts, and says so.
    Blackwell (sm_100) still takes Hopper's, Maxwell (sm_52) Pascal's."""
    from perfmodel.hw import arch

    assert arch.closest("sm_89", ["sm_61", "sm_80", "sm_86", "sm_90"]) == "sm_86"
    assert [arch.nearest(s) for s in ("sm_89", "sm_87", "sm_100", "sm_52")] == ["sm_89", "sm_86", "sm_90", "sm_61"]
    text = (Path(__file__).resolve().parents[2] / "gpus" / "rtx3090.yaml").read_text()
    orin = tmp_path / "orin.yaml"
    orin.write_text(text.replace('compute_capability: "8.6"', 'compute_capability: "8.7"')
                    .replace("name: NVIDIA GeForce RTX 3090", "name: an sm_87 card")
                    .replace('aliases: ["3090", rtx-3090]', "aliases: []"))
    p = api.predict(str(orin), "fa2", N=512, Br=32, Bc=32).prediction
    assert "sm_86 constants assumed for sm_87" in p.constants
    assert any("read off sm_86" in n for n in p.notes)
