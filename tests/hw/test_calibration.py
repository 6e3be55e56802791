import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from perfmodel.evaluation import fit
from perfmodel.hw import calibration, gpu
from perfmodel.errors import InputError

H100 = gpu.resolve("h100")
ROOT = Path(__file__).resolve().parents[2]


def test_shipped_calibration_has_provenance_and_fits():
    p = calibration.builtin_path(H100)
    raw = yaml.safe_load(p.read_text())
    for k in ("gpu_name", "sm_clock_mhz", "driver", "torch", "nvcc", "date", "command"):
        assert raw["provenance"][k]
    cal = calibration.resolve(H100)
    assert cal.source == f"built-in calibration/{p.name}"
    assert set(cal.path_fits) == {"fa1", "fa2", "fa2_tc"}
    for f in cal.path_fits.values():
        assert f["training"]["rule"] == fit.SPLIT_RULE
    assert calibration.resolve(H100, use_fits=False).path_fits == {}
    # a GPU without a shipped file gets spec-derived values
    assert calibration.resolve(gpu.resolve("rtx3090")).basis == "spec"


@pytest.mark.parametrize("values,needle", [({"bogus": 1.0}, "unknown calibration field 'bogus'"),
                                           ({"dram_bw_bps": -1}, "must be positive"),
                                           ({"dram_bw_bps": "x"}, "must be a number"),
                                           ({"overlap_p": float("nan")}, "must be finite"),
                                           ({"path_cycles": {"dot": 0}}, "path_cycles.dot must be positive"),
                                           ({"path_cycles": {"iter": 1}}, "unknown path feature 'iter'")])
def test_bad_calibration_files(tmp_path, values, needle):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"values": values}))
    with pytest.raises(InputError, match=needle):
        calibration.load(p, H100)


def test_bad_path_fits(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"values": {}, "path_fits": {"fa2": {"costs": {"nonsense": 1}}}}))
    with pytest.raises(InputError, match="path_fits.fa2.costs"):
        calibration.load(p, H100)


def test_training_split_is_the_declared_crc32_rule():
    rows = list(csv.DictReader(open(ROOT / "examples/measurements/h100/fa2.csv")))
    import zlib
    key = lambda r: ",".join(r[k] for k in ("kernel", "B", "H", "N", "d", "Br", "Bc", "threads", "pad"))
    assert [fit.in_training_split(r) for r in rows] == [zlib.crc32(key(r).encode()) % 4 == 0 for r in rows]
    flags = [fit.in_training_split(r) for r in rows]
    assert 0.18 < sum(flags) / len(flags) < 0.32
    assert calibration.resolve(H100).path_fits["fa2"]["training"]["rows"] == sum(flags)


@pytest.mark.parametrize("name", ["h100-sxm", "h200"])
def test_every_committed_fit_is_reproduced_by_the_command_it_records(name, tmp_path):
    """Each path_fits entry records the command that made it; running it again gives the same costs."""
    import shlex
    import shutil

    from click.testing import CliRunner

    from perfmodel.cli import main

    src = ROOT / "gpus" / "calibration" / f"{name}.yaml"
    raw = yaml.safe_load(src.read_text())
    assert raw["path_fits"]
    for kernel, entry in raw["path_fits"].items():
        cmd = entry.get("carried_over", {}).get("command") or entry["training"]["command"]
        argv = shlex.split(cmd)
        assert argv[0] == "perfmodel"
        i = argv.index("--calibration")
        target = tmp_path / f"{name}.yaml"
        shutil.copy(src, target)
        argv[i + 1] = str(target)
        if "--from" in argv:                       # carried over: read from the committed source file
            j = argv.index("--from")
            argv[j + 1] = str(ROOT / argv[j + 1])
        argv = [str(ROOT / a) if a.endswith(".csv") else a for a in argv]
        r = CliRunner().invoke(main, argv[1:])
        assert r.exit_code == 0, r.output
        again = yaml.safe_load(target.read_text())["path_fits"][kernel]["costs"]
        for f, v in entry["costs"].items():
            # the fit's finite differences see the float32 model's last digits, which differ between numpy builds:
            # along the fit's flat directions (features that grow alike: fit.py) its costs land up to ~10% apart
            # (fa2_tc's fp32 step: 1.40 against 1.53 cycles under numpy 2.4.6), a cost driven to nothing (fa1's exp,
            # fa2's sync: hundredths of a cycle) anywhere near it, while the fit itself, its error on the training
            # rows, reproduces (below)
            assert again[f] == pytest.approx(v, rel=0.15, abs=0.1), (kernel, f)
        if "training" in entry and "carried_over" not in entry:
            redo = yaml.safe_load(target.read_text())["path_fits"][kernel]["training"]["mape_on_training_rows"]
            assert redo == pytest.approx(entry["training"]["mape_on_training_rows"], abs=0.02), kernel
        after = entry.get("training", {}).get("fitted_after")
        if after and "carried_over" not in entry:
            # what was fitted after the path costs, those held (--after-only): run on the committed file, it
            # fits the same values again (one or two parameters, nothing flat to wander along)
            argv = shlex.split(after["command"])
            shutil.copy(src, target)
            argv[argv.index("--calibration") + 1] = str(target)
            argv = [str(ROOT / a) if a.endswith(".csv") else a for a in argv]
            r = CliRunner().invoke(main, argv[1:])
            assert r.exit_code == 0, r.output
            redo = yaml.safe_load(target.read_text())["path_fits"][kernel]
            for f in after["features"]:
                assert redo["costs"][f] == pytest.approx(entry["costs"][f], rel=1e-3), (kernel, f)
            assert {f: v for f, v in redo["costs"].items() if f not in after["features"]} == \
                {f: v for f, v in entry["costs"].items() if f not in after["features"]}
            assert redo["training"]["fitted_after"]["mape_on_training_rows"] == pytest.approx(
                after["mape_on_training_rows"], abs=0.01)


def test_fit_recovers_known_costs_from_synthetic_timings():
    """Timings made by the model itself with chosen path costs: the fit finds the dominant cost (the dot step)
    again and reproduces every timing. fa1's exp, gmem, sync and outer features are nearly collinear on its path
    (each grows with the K/V tiles), so the fit may trade them against each other: only their sum over a path is
    determined, which is what the last assertion checks."""


    from perfmodel.evaluation import dataset
    from perfmodel.evaluation.validate import predict_set

    (ms,) = dataset.load([ROOT / "examples/measurements/h100/fa1.csv"])
    cal = dataclasses.replace(calibration.resolve(H100, use_fits=False))
    truth = {"dot": 11.0, "reduction": 13.2, "exp": 40.0, "outer": 0.5, "gmem": 350.0, "sync": 30.0}
    synthetic, _ = predict_set(ms, H100, dataclasses.replace(cal, path_fits={"fa1": {"costs": truth}}))
    ms = dataclasses.replace(ms, measured_s=synthetic)
    got = fit.fit_path(H100, cal, ms, iters=200)["costs"]
    assert got["dot"] == pytest.approx(truth["dot"], rel=0.01)
    pred, _ = predict_set(ms, H100, dataclasses.replace(cal, path_fits={"fa1": {"costs": got}}))
    assert np.abs(pred / synthetic - 1).max() < 0.01


def test_other_architectures_take_a_kernel_fit_scaled_to_their_latencies():
    """A GPU of another architecture (the A100: sm_80) takes h100-sxm's fits (gpus/arch/sm_80.yaml:
    scaled_fits_from): the join parameters (calibration.JOIN_PARAMS, no unit) as they are, each cost in cycles as
    the same multiple of sm_80's base cost (its probe-equivalent latency) that the fit is of the H100 probe's, a
    cost without a base (fa2's 'outer') as it is. A GPU of the same SM (the H100 PCIe) takes the fits whole
    (path_fits_from), and --no-fits drops both."""
    h100 = calibration.resolve(H100)
    a100 = calibration.resolve(gpu.resolve("a100-80gb"))
    assert set(a100.path_fits) == set(h100.path_fits) == {"fa1", "fa2", "fa2_tc"}
    for k in a100.path_fits:
        assert a100.path_fits[k]["carried"] == "scaled" and a100.path_fits[k]["carried_from"] == "h100-sxm"
        fitted, got = h100.path_fits[k]["costs"], a100.path_costs(k)
        for p, c in fitted.items():
            base = calibration.CYCLE_BASE.get(p, p)
            if p in calibration.JOIN_PARAMS or h100.path_cycles.get(base, 0) == 0:
                assert got[p] == c
            else:
                assert got[p] == pytest.approx(c * a100.path_cycles[base] / h100.path_cycles[base], rel=1e-12)
    # sm_80's L2 latency (310 cycles, published) against the H100 probe's 425: fa2_tc's fixed cost a block scales
    assert a100.path_costs("fa2_tc")["gmem"] == pytest.approx(h100.path_fits["fa2_tc"]["costs"]["gmem"] * 310 / 425.37,
                                                              rel=1e-3)
    assert a100.path_costs("fa2")["outer"] == h100.path_fits["fa2"]["costs"]["outer"] > 0
    assert a100.path_basis("fa2_tc") == "fitted, scaled"
    assert ("path costs fitted on a training split of h100-sxm of fa2_tc, scaled to this architecture's latencies"
            in a100.describe("fa2_tc", "sdpa-flash"))
    pcie = calibration.resolve(gpu.resolve("h100-pcie"))
    fitted = h100.path_fits["fa2_tc"]["costs"]
    assert pcie.path_costs("fa2_tc") == {**pcie.path_costs("none"), **fitted} and "carried" not in pcie.path_fits["fa2_tc"]
    assert calibration.resolve(gpu.resolve("a100-80gb"), use_fits=False).path_fits == {}


def test_scaled_fits_on_a_measured_gpu():
    """The scaled carry on measured data: a GPU whose costs are its probe's with only the join parameters of a fit
    (what other architectures took before) is far off on the H100's own rows (fa2_tc 17% slow; the probe alone
    puts fa2 23% fast), while the H100's fits carried to the H200 scaled to the H200's own probe (a second SM
    probe, latencies within 2% of the H100's) predict the H200's rows as the fits carried whole do."""
    from perfmodel.evaluation import dataset
    from perfmodel.evaluation.validate import predict_set

    h100, h200 = calibration.resolve(H100), calibration.resolve(gpu.resolve("h200"))
    join_only = {k: {"costs": {p: c for p, c in f["costs"].items() if p in calibration.JOIN_PARAMS}}
                 for k, f in h100.path_fits.items()}
    ms = dataset.load([ROOT / "examples/measurements/h100/fa2_tc.csv"])[0]
    bias = lambda cal, m: float(np.mean(predict_set(m, gpu.match_device_name(m.gpu_name), cal)[0] / m.measured_s) - 1)
    assert bias(dataclasses.replace(h100, path_fits=join_only), ms) > 0.12
    assert abs(bias(h100, ms)) < 0.01
    fa2 = dataset.load([ROOT / "examples/measurements/h100/fa2.csv"])[0]
    assert bias(dataclasses.replace(h100, path_fits={}), fa2) < -0.15 and abs(bias(h100, fa2)) < 0.02
    head = {"scaled_fits_from": "h100-sxm"}
    scaled = dataclasses.replace(h200, path_fits=calibration.carried_fits(gpu.resolve("h200"), head, h200.path_cycles))
    for kernel in ("fa2_tc", "fa2"):
        m = dataset.load([ROOT / f"examples/measurements/h200/{kernel}.csv"])[0]
        assert abs(bias(scaled, m) - bias(h200, m)) < 0.02


def test_a100_flash_lies_near_the_published_figure():
    """FlashAttention-2's forward on an A100-SXM4-80GB at d = 128, B = 16, H = 16, N = 8192, non-causal: 203.7 TFLOP/s
    (yencal/flash-attention-from-scratch's README, via ../shared/reference/tensorcore.md; README, GPU specs). From the
    spec, sm_80's published constants and fa2_tc's H100 fit scaled to them the model predicts 190 TFLOP/s (7% low).
    With only the fit's join parameters (path costs at sm_80's latencies) it read 167 (18% low); with none of the
    fit (the probe's p 3.9, a warp's own work at the SM's rate) 306, the tensor pipe's own limit. Nothing is fitted
    to the published figure."""
    from perfmodel import api

    r = api.predict(gpu="a100-80gb", kernel="sdpa-flash", B=16, H=16, N=8192, d=128, dtype="fp16").to_dict()
    tflops = r["useful_flops"] / r["time_s"] / 1e12
    assert 0.85 * 203.7 < tflops < 1.15 * 203.7
    assert r["path_costs"] == "fitted, scaled"


def test_ranking_share_fits_the_tile_ratios_a_per_problem_bias_hides():
    """Timings made by the model with chosen costs, then each problem's rows scaled by a factor of its own (a bias
    no path cost can follow, which leaves the ratios between its tiles as they were): a fit that puts most of its
    weight on the ratios of one problem's rows (ranking_share) recovers those ratios better than the plain fit,
    and records what it weighed."""
    from perfmodel.evaluation import dataset
    from perfmodel.evaluation.validate import predict_set

    (ms,) = dataset.load([ROOT / "examples/measurements/h100/fa1.csv"])
    cal = calibration.resolve(H100, use_fits=False)
    truth = {"dot": 11.0, "reduction": 13.2, "exp": 40.0, "outer": 0.5, "gmem": 350.0, "sync": 30.0}
    synthetic, _ = predict_set(ms, H100, dataclasses.replace(cal, path_fits={"fa1": {"costs": truth}}))
    pairs = fit.problem_pairs(ms)
    assert len(pairs) > 50
    keys = ms.problems()
    problems = sorted(set(keys))
    factor = dict(zip(problems, np.random.default_rng(0).uniform(0.7, 1.4, len(problems))))
    biased = synthetic * np.array([factor[k] for k in keys])
    ms = dataclasses.replace(ms, measured_s=biased)

    def ratio_error(entry):
        pred, _ = predict_set(ms, H100, dataclasses.replace(cal, path_fits={"fa1": {"costs": entry["costs"]}}))
        e = np.log(pred / synthetic)
        return np.sqrt(np.mean((e[pairs[:, 0]] - e[pairs[:, 1]]) ** 2))

    plain = fit.fit_path(H100, cal, ms, iters=100)
    ranked = fit.fit_path(H100, cal, ms, iters=100, ranking_share=0.9)
    assert "ranking_share" not in plain["training"]
    t = ranked["training"]
    assert t["ranking_share"] == 0.9 and t["problem_pairs"] > 0
    assert t["pair_weight"] == pytest.approx(9 * t["rows"] / t["problem_pairs"])
    assert ratio_error(ranked) < 0.5 * ratio_error(plain)
    with pytest.raises(InputError, match="ranking share"):
        fit.fit_path(H100, cal, ms, ranking_share=1.0)


@pytest.mark.parametrize("key,shipped", [("h100", "h100-sxm"), ("h200", "h200")])
def test_a_later_probe_run_reproduces_the_shipped_calibration(key, shipped):
    """A whole `perfmodel probe` run a day after the shipped one (examples/measurements/*/
    probe-calibration.yaml): every figure within 4% of the shipped calibration's, the path latencies within 2%,
    except the L2 read bandwidth (its kernel reads L1: 7-14% lower), the launch overhead (3-9% higher) and the
    effective L2 size (3-4% larger); research/notes/known-gaps-log.md."""
    run = yaml.safe_load((ROOT / "examples" / "measurements" / key / "probe-calibration.yaml").read_text())
    ref = yaml.safe_load((ROOT / "gpus" / "calibration" / f"{shipped}.yaml").read_text())
    assert run["provenance"]["gpu_name"] == ref["provenance"]["gpu_name"]
    assert run["provenance"]["date"] > ref["provenance"]["date"]
    loose = {"l2_bw_bps": 0.15, "launch_overhead_s": 0.10, "l2_effective_bytes": 0.05}
    for k, v in run["values"].items():
        if k == "path_cycles":
            for f, c in v.items():
                assert c == pytest.approx(ref["values"][k][f], rel=0.02), f
        else:
            assert v == pytest.approx(ref["values"][k], rel=loose.get(k, 0.04)), k


def test_a_probe_file_without_the_shared_room_keeps_the_device_scaled_unit(tmp_path):
    """`perfmodel probe` leaves l2_shared_bytes out where its timed launches find no step (a 0 would not load: every
    calibration field must be positive); the file then loads with the default, 0, which the DRAM rule reads as
    unmeasured (the device's L2 size)."""
    spec = gpu.resolve("h100")
    raw = yaml.safe_load((ROOT / "examples" / "measurements" / "h100" / "probe-calibration.yaml").read_text())
    raw["values"].pop("l2_shared_bytes")
    f = tmp_path / "cal.yaml"
    f.write_text(yaml.safe_dump(raw))
    assert calibration.load(f, spec).l2_shared_bytes == 0.0
    raw["values"]["l2_shared_bytes"] = 0.0
    f.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match="l2_shared_bytes"):
        calibration.load(f, spec)


def test_a_probe_file_without_fits_takes_its_architectures_fits():
    """A `perfmodel probe` run writes no path_fits; loaded, it takes the fits its architecture's file names (the
    H100's own for sm_90), as a GPU without any file does, and its own fits where it has them win. With them the
    whole probe runs of 2026-11-23 (examples/measurements/*/probe-calibration.yaml) score fa2_tc near the shipped calibrations (H100
    held-out rows 3.6% against 3.1%; H200 every row 3.0%); with probe constants alone the H100's were 20.7% off."""
    from perfmodel.evaluation import dataset, validate

    spec = gpu.resolve("h100")
    probe_file = ROOT / "examples" / "measurements" / "h100" / "probe-calibration.yaml"
    cal = calibration.load(probe_file, spec)
    shipped = calibration.resolve(spec)
    assert set(cal.path_fits) == set(shipped.path_fits)
    for k, f in cal.path_fits.items():
        assert f["carried_from"] == "h100-sxm" and f["costs"] == shipped.path_fits[k]["costs"]
    assert "fitted on a training split of h100-sxm" in cal.describe("fa2_tc", "fa2_tc")
    # the shipped file itself takes nothing from itself
    assert all("carried_from" not in f for f in shipped.path_fits.values())
    (ms,) = dataset.load([ROOT / "examples" / "measurements" / "h100" / "fa2_tc.csv"])
    with_fits, = validate.evaluate([ms], cal_path=str(probe_file))
    without, = validate.evaluate([ms], cal_path=str(probe_file), use_fits=False)
    assert with_fits.summary()["mape"] < 4.0 < 15.0 < without.summary()["mape"]
    h200_file = ROOT / "examples" / "measurements" / "h200" / "probe-calibration.yaml"
    (ms,) = dataset.load([ROOT / "examples" / "measurements" / "h200" / "fa2_tc.csv"])
    h200, = validate.evaluate([ms], cal_path=str(h200_file), split="all")
    assert h200.summary()["mape"] < 3.5


def test_fit_after_only_will_not_hold_carried_costs(tmp_path):
    """`perfmodel fit --after-only` holds path costs fitted on the file's own rows; costs a probe file takes from
    its architecture's donor are not that, so it refuses (a one-line error, exit code 2)."""
    import shutil

    from click.testing import CliRunner

    from perfmodel.cli import main

    f = tmp_path / "cal.yaml"
    shutil.copy(ROOT / "examples" / "measurements" / "h100" / "probe-calibration.yaml", f)
    before = f.read_text()
    r = CliRunner().invoke(main, ["fit", str(ROOT / "examples" / "measurements" / "h100" / "fa2_tc.csv"), "--kernel",
                                  "fa2_tc", "--calibration", str(f), "--after-only"])
    assert r.exit_code == 2 and "holds no path costs of fa2_tc fitted on its own rows" in r.output
    assert f.read_text() == before
