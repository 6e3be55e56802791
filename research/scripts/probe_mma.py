"""The tensor-core part of `perfmodel probe` alone (mma.sync latency and SM rate per dtype), as JSON: for adding
these constants to a calibration measured before the probe had them. Usage: python3 research/scripts/probe_mma.py OUT.json"""

from perfmodel.measure import build, probe
import common


def main(path):
    torch = build.require_torch()
    tool = build.check_toolchain(torch)
    ext = build.load_probe()
    props = torch.cuda.get_device_properties(0)
    out = probe._mma(torch, ext, props.multi_processor_count, props.major >= 8, print)
    common.write_record(path, torch, tool, out, indent=1)


if __name__ == "__main__":
    common.run_script(main)
