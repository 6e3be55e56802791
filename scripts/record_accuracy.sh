#!/usr/bin/env bash
# Record the model's accuracy on the committed H100 datasets (examples/accuracy.json), which
# tests/test_datasets.py holds as a regression bound: held-out rows (the default split), with the fitted path
# costs and with probe constants only. Run after a change that improves the model.
set -euo pipefail
cd "$(dirname "$0")/.."
files="examples/measurements/h100/fa1.csv examples/measurements/h100/fa2.csv"
perfmodel validate $files --json > /tmp/acc_fitted.json
perfmodel validate $files --json --no-fits > /tmp/acc_probe.json
python3 - <<'PY' > examples/accuracy.json
import json
fitted, probe = json.load(open("/tmp/acc_fitted.json")), json.load(open("/tmp/acc_probe.json"))
for d in (fitted, probe):
    for v in d.values():
        v.pop("files")
print(json.dumps({"command": "scripts/record_accuracy.sh", "fitted": fitted, "probe_only": probe}, indent=2))
PY
cat examples/accuracy.json
