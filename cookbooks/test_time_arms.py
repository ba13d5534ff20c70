#!/usr/bin/env python3
"""Test-time arms vs greedy (§6.2 of arXiv 2606.14470), one command.

Runs greedy, self-consistency, argue-each-option, single revision, verifier best-of-N
and the full tree-of-thoughts solver on the same M problems with the same seeds, every
node a commit, and reports accuracy and Δ pp vs greedy [95% CI] (table.md, deltas.png),
then audits the run.

    python cookbooks/test_time_arms.py --standin --out runs/arms
"""

import sys
from pathlib import Path

from got_core.bench.protocols import cookbook_main

if __name__ == "__main__":
    sys.exit(
        cookbook_main(
            "test_time_arms",
            " ".join(__doc__.split("\n\n")[:2]),
            Path(__file__).resolve().parent.parent / "tests" / "data",
        )
    )
