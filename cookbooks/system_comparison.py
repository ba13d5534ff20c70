#!/usr/bin/env python3
"""System comparison (§6, Table 8 of arXiv 2606.14470), one command.

A vanilla single call (no tools, one model call) vs self-consistency (sc5: 5 samples) vs the
full tree-of-thoughts solver on the same M problems, each under its own wall-clock budget as
published (--budgets vanilla=60,sc5=180,tot=600); --compute-matched S runs every arm again at
one budget of S seconds (the paper's listed control, a second table). The tables report
accuracy, Δ pp vs vanilla [95% CI], the budget, timeouts, wall-clock seconds, calls and
tokens per problem, then the run is audited.

    python cookbooks/system_comparison.py --standin --out runs/system --compute-matched 600
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
