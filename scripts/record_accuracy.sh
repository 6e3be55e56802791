#!/usr/bin/env bash
# Record the model's accuracy on the committed H100 datasets (examples/accuracy.json), which
# tests/test_datasets.py holds as a regression bound: held-out rows (the default split), with the fitted path
# costs and with probe constants only. Run after a change that improves the model.
set -euo pipefail
cd "$(dirname "$0")/.."
files="examples/measurements/h100/fa1.csv examples/measurements/h100/fa2.csv"
perfmodel validate $files --json > /tmp/acc_fitted.json
perfmodel validate $files --json --no-fits > /tmp/acc_probe.json
# the H200: no H200 timing is fitted (its path costs come from the H100), so every row is scored
perfmodel validate examples/measurements/h200/fa1.csv examples/measurements/h200/fa2.csv --json --split all > /tmp/acc_h200.json
python3 - <<'PY' > examples/accuracy.json
import json
fitted, probe = json.load(open("/tmp/acc_fitted.json")), json.load(open("/tmp/acc_probe.json"))
h200 = json.load(open("/tmp/acc_h200.json"))
for d in (fitted, probe, h200):
    for v in d.values():
        v.pop("files")
print(json.dumps({"command": "scripts/record_accuracy.sh", "fitted": fitted, "probe_only": probe,
                  "h200_all_rows": h200}, indent=2))
PY
cat examples/accuracy.json
