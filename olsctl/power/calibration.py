"""Derive the measured power distribution olsctl ships from the NREL job power log.

The NREL log (BSD-3-Clause, Alliance for Sustainable Energy) has one measured average
power per node for 161,266 jobs. olsctl ships only what it derives from it: quantiles of
the per-node power of the jobs with a measurement (0 W rows are missing data), in
``olsctl/data/nrel_power.json``, with the license beside it. Re-derive with::

    python -m olsctl.power.calibration ground_truth.csv.gz > olsctl/data/nrel_power.json
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

import numpy as np

#: quantile levels stored (0 %, 1 %, ..., 100 %)
LEVELS = np.linspace(0.0, 1.0, 101)


def derive(path: Path) -> dict:
    """Quantiles of per-node average power (W) over jobs with a measurement."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        power = np.array([float(row["avg_power_per_node"]) for row in csv.DictReader(fh)])
    measured = power[power > 0]
    return {
        "source": "NREL job power log (SC'25 data artifact), BSD-3-Clause; see "
                  "LICENSE.nrel-BSD-3-Clause",
        "quantity": "average power per node over a job's run, watts",
        "jobs": int(power.size),
        "jobs_measured": int(measured.size),
        "mean_w": round(float(measured.mean()), 3),
        "levels": [round(float(x), 2) for x in LEVELS],
        "quantiles_w": [round(float(q), 3) for q in np.quantile(measured, LEVELS)],
    }


if __name__ == "__main__":  # pragma: no cover - a maintenance tool
    json.dump(derive(Path(sys.argv[1])), sys.stdout, indent=1)
    sys.stdout.write("\n")
