import pytest
import yaml

from perfmodel.hw import gpu
from perfmodel.errors import InputError

REQUIRED_KEYS = ["h100-sxm", "h100-pcie", "h200", "a100-40gb", "a100-80gb", "rtx3090", "gtx1080", "rtx4090", "l40s",
                 "l4"]


def test_every_shipped_spec_loads_and_has_sources():
    specs = gpu.builtin_specs()
    for key in REQUIRED_KEYS:
        assert key in specs
    for path in specs.values():
        s = gpu.load_spec_file(path)
        assert s.sources and all(src.strip() for src in s.sources)
        assert s.smem_per_block_optin_bytes <= s.smem_per_sm_bytes
        assert s.max_warps_per_sm * s.warp_size == s.max_threads_per_sm


@pytest.mark.parametrize("name,key", [("h100", "h100-sxm"), ("H100", "h100-sxm"), ("rtx3090", "rtx3090"),
                                      ("3090", "rtx3090"), ("a100", "a100-40gb"), ("h200", "h200")])
def test_aliases(name, key):
    assert gpu.resolve(name).key == key


def test_units_converted_once():
    s = gpu.resolve("h100")
    assert s.clock_hz == 1980e6
    assert s.smem_bw == pytest.approx(128 * 132 * 1.98e9)
    assert s.dram_bw == 2960e9          # the measured copy bandwidth wins over the datasheet's
    assert s.dram_bw_peak == 3352e9
    assert s.tensor_flops("bf16") == pytest.approx(989.4e12)
    assert gpu.resolve("gtx1080").tensor_flops("fp16") is None


def _write(tmp_path, data, name="g.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return p


def _base():
    return yaml.safe_load(gpu.builtin_specs()["h100-sxm"].read_text())


def test_user_file_is_accepted(tmp_path):
    data = _base()
    data["name"] = "My GPU"
    data["sm_count"] = 66
    s = gpu.resolve(str(_write(tmp_path, data)))
    assert s.sm_count == 66 and s.key == "g"


def test_numbers_as_people_write_them(tmp_path):
    """A compute capability written unquoted (9.0, or 9) and an exponent YAML 1.1 leaves a string (2e3) read as
    the numbers they write."""
    text = gpu.builtin_specs()["h100-sxm"].read_text().replace('compute_capability: "9.0"', "compute_capability: 9")
    p = tmp_path / "g.yaml"
    p.write_text(text.replace("clock_boost_mhz: 1980", "clock_boost_mhz: 2e3"))
    s = gpu.load_spec_file(p)
    assert s.sm == "sm_90" and s.clock_hz == 2e9


@pytest.mark.parametrize("mutate,needle", [
    (lambda d: d.pop("sm_count"), "missing field 'sm_count'"),
    (lambda d: d.update(bogus_mhz=1), "unknown field 'bogus_mhz'"),
    (lambda d: d.update(sm_count="many"), "field 'sm_count' must be int"),
    (lambda d: d.update(sm_count=1.5), "field 'sm_count' must be int"),
    (lambda d: d.update(dram_bw_gbps=-1), "field 'dram_bw_gbps' must be positive"),
    (lambda d: d.update(l2_bytes=0), "field 'l2_bytes' must be positive"),
    (lambda d: d.update(sources=[]), "field 'sources' must list at least one source"),
    (lambda d: d.update(compute_capability="banana"), "field 'compute_capability' must be MAJOR.MINOR"),
    (lambda d: d.update(clock_boost_mhz="fast"), "field 'clock_boost_mhz' must be float"),
])
def test_validation_names_file_and_field(tmp_path, mutate, needle):
    data = _base()
    mutate(data)
    p = _write(tmp_path, data)
    with pytest.raises(InputError) as e:
        gpu.load_spec_file(p)
    assert needle in str(e.value) and str(p) in str(e.value)


def test_malformed_and_missing_files(tmp_path):
    with pytest.raises(InputError, match="malformed YAML"):
        gpu.load_spec_file(_write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(InputError, match="expected a mapping"):
        gpu.load_spec_file(_write(tmp_path, "- 1\n- 2\n"))
    with pytest.raises(InputError, match="not found"):
        gpu.resolve(str(tmp_path / "nope.yaml"))
    with pytest.raises(InputError, match="unknown GPU 'v100'; known: .*h100-sxm"):
        gpu.resolve("v100")


def test_match_device_name():
    assert gpu.match_device_name("NVIDIA H100 80GB HBM3").key == "h100-sxm"
    assert gpu.match_device_name("Some Other GPU") is None
