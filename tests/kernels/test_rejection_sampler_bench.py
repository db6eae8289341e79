"""Smoke test of minispec/bench/rejection_sampler_gpu.py: its --dry-run path (CPU, Triton interpreter).

Runs in a subprocess so that the script's TRITON_INTERPRET=1 and its imports stay out of this process.
"""

import csv
import json
import subprocess
import sys


def test_dry_run_writes_csv(tmp_path):
    path = tmp_path / "rs.csv"
    result = subprocess.run(
        [sys.executable, "-m", "minispec.bench.rejection_sampler_gpu", "--dry-run", "--csv", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 8
    assert all(row["match"] == "True" for row in rows)
    assert {"kernels_us", "reference_us", "floor_us", "e2e_triton_us"} <= set(rows[0])
    data = json.loads(path.with_suffix(".json").read_text())  # every sample, for chapter 6's intervals
    assert len(data["rows"]) == 8 and "--dry-run" in data["command"]
    assert all(len(r["kernels_samples_us"]) == len(r["reference_samples_us"]) == 2 for r in data["rows"])
