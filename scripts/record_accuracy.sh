#!/usr/bin/env bash
# Record the model's accuracy on the committed H100 datasets (examples/accuracy.json), which
# tests/test_datasets.py holds as a regression bound. Run after a change that improves the model.
set -euo pipefail
cd "$(dirname "$0")/.."
perfmodel validate examples/measurements/h100/fa1.csv examples/measurements/h100/fa2.csv --json \
  | python3 -c "import json,sys; d=json.load(sys.stdin); [v.pop('files') for v in d.values()]; print(json.dumps(d, indent=2))" \
  > examples/accuracy.json
cat examples/accuracy.json
