"""fp32 reductions into L2, the backward's dQ accumulation, as `perfmodel probe` measures them (its step 5c,
perfmodel.measure.probe.atomics), alone, as JSON with its provenance.
    python3 research/scripts/probe_atomics.py OUT.json
"""
from perfmodel.measure import build, probe
import common


def main(path):
    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load_probe()
    raw = {}
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    probe.atomics(torch, ext, sm, raw, print)
    common.write_record(path, torch, tool, {"raw": raw, "blocks": 8 * sm, "threads": 256,
                                            "region_floats": probe.RED_REGION}, indent=1)


if __name__ == "__main__":
    common.run_script(main)
