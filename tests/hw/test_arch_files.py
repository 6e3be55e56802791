"""gpus/arch/*.yaml: the same keys in every file, and every value with a source or marked as an estimate (issue 12:
no unsourced constant for an unprobed GPU)."""
from pathlib import Path

import yaml

ARCH = Path(__file__).resolve().parents[2] / "gpus" / "arch"
FILES = sorted(ARCH.glob("sm_*.yaml"))
SM90_ONLY = {"wgmma_fraction", "wgmma_wait_cycles"}


def _values(p):
    return yaml.safe_load(p.read_text())["values"]


def test_every_architecture_file_has_the_same_keys():
    assert len(FILES) >= 4
    keys = {p.name: set(_values(p)) - SM90_ONLY for p in FILES}
    first = keys[FILES[0].name]
    assert all(k == first for k in keys.values()), keys


def test_every_value_has_a_source_and_a_note():
    for p in FILES:
        doc = yaml.safe_load(p.read_text())
        declared = {s.split(":")[0] for s in doc.get("sources", [])}
        for key, entry in doc["values"].items():
            assert set(entry) == {"value", "source", "note"}, (p.name, key)
            src = str(entry["source"]).strip()
            assert src and str(entry["note"]).strip(), (p.name, key)
            if entry["value"] is None:
                assert src == "n/a", (p.name, key)
            elif not src.startswith("estimate"):
                # a sourced value names at least one of the file's declared sources
                assert any(tag in src for tag in declared), (p.name, key, src)
