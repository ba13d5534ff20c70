#!/usr/bin/env python3
"""Test-time arms vs greedy (§6.2 of arXiv 2606.14470), one command.

Runs greedy, self-consistency, argue-each-option, single revision, verifier best-of-N and the
full tree-of-thoughts solver on the same M problems with the same seeds, every node a commit;
--arm-option ARM.KEY=V[,V...] sets or sweeps an arm's knobs (several values: one arm each).
Reports accuracy, Δ pp vs greedy [95% CI], calls, tokens per problem and the token ratio to
greedy (table.md, deltas.png), then audits the run.

    python cookbooks/test_time_arms.py --standin --out runs/arms
    python cookbooks/test_time_arms.py --standin --arms self_consistency \
        --arm-option self_consistency.n=5 --arm-option self_consistency.temperature=0.5,0.7,1.0
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
