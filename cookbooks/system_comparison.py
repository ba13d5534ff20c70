#!/usr/bin/env python3
"""System comparison (§6 of arXiv 2606.14470), one command.

A vanilla single call (no tools, one model call) vs self-consistency (5 samples) vs the
full tree-of-thoughts solver, on the same M problems, each under the same wall-clock
budget per question (--budget-s); the table reports accuracy, Δ pp vs vanilla [95% CI],
the budget and each arm's wall-clock seconds, calls and tokens per problem, then the
run is audited.

    python cookbooks/system_comparison.py --standin --out runs/system --budget-s 120
"""

import sys
from pathlib import Path

from got_core.bench.protocols import cookbook_main

if __name__ == "__main__":
    sys.exit(
        cookbook_main(
            "system_comparison",
            " ".join(__doc__.split("\n\n")[:2]),
            Path(__file__).resolve().parent.parent / "tests" / "data",
        )
    )
