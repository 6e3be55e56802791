import csv
from pathlib import Path

import pytest
import yaml

from perfmodel.evaluation import fit
from perfmodel.hw import calibration, gpu
from perfmodel.errors import InputError

H100 = gpu.resolve("h100")
ROOT = Path(__file__).resolve().parent.parent


def test_shipped_calibration_has_provenance_and_fits():
    p = calibration.builtin_path(H100)
    raw = yaml.safe_load(p.read_text())
    for k in ("gpu_name", "sm_clock_mhz", "driver", "torch", "nvcc", "date", "command"):
        assert raw["provenance"][k]
    cal = calibration.resolve(H100)
    assert cal.source == f"built-in calibration/{p.name}"
    assert set(cal.path_fits) == {"fa1", "fa2"}
    for f in cal.path_fits.values():
        assert f["training"]["rule"] == fit.SPLIT_RULE
    assert calibration.resolve(H100, use_fits=False).path_fits == {}
    # a GPU without a shipped file gets spec-derived values
    assert calibration.resolve(gpu.resolve("rtx3090")).source == "spec"


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


def test_training_split_is_a_fixed_quarter():
    rows = list(csv.DictReader(open(ROOT / "examples/measurements/h100/fa2.csv")))
    flags = [fit.in_training_split(r) for r in rows]
    assert flags == [fit.in_training_split(dict(r)) for r in rows]      # deterministic
    assert 0.18 < sum(flags) / len(flags) < 0.32
    assert calibration.resolve(H100).path_fits["fa2"]["training"]["rows"] == sum(flags)
