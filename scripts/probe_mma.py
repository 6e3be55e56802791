"""The tensor-core part of `perfmodel probe` alone (mma.sync latency and SM rate per dtype), as JSON: for adding
these constants to a calibration measured before the probe had them. Usage: python3 scripts/probe_mma.py OUT.json"""
import json
import sys

from perfmodel.measure import build, probe

torch = build.require_torch()
tool = build.check_toolchain(torch)
ext = build.load()
props = torch.cuda.get_device_properties(0)
out = probe._mma(torch, ext, props.multi_processor_count, props.major >= 8, print)
out["provenance"] = probe.script_provenance(torch, tool, "python3 scripts/probe_mma.py " + " ".join(sys.argv[1:]))
json.dump(out, open(sys.argv[1], "w"), indent=1)
