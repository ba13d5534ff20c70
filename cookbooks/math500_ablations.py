#!/usr/bin/env python3
"""MATH-500 ablations (Table 6, Fig. 2 of arXiv 2606.14470), one command.

Every arm answers the same MATH test problems with the single-shot retrieval-augmented agent:
none, sc5 (self-consistency, 5 samples), static few-shot (3 fixed exemplars), markdown / vector
/ git (top-3 worked examples retrieved from --memory-corpus, MATH-train in the MATH-500 JSONL
format, leakage-audited against the test set first), vector subject-filtered, the content arms
vector answer-only / full worked solution / answer-free lesson, and git_online (a git memory
accumulating the agent's own verified solutions over the test stream, reported by quartile).
Writes the table (accuracy, Δ pp vs none [95% CI], *), forest.png (Fig. 2), online.png,
leakage.jsonl and the result files into --out, then audits the run.

    python cookbooks/math500_ablations.py --standin --out runs/ablations           # no model needed
    python cookbooks/math500_ablations.py --base-url http://127.0.0.1:8765/v1 --model MODEL \
        --math MATH500.jsonl --m-test 500 --memory-corpus MATH_TRAIN_2000.jsonl --max-tokens 1024
"""

import sys
from pathlib import Path

from got_core.bench.protocols import cookbook_main

if __name__ == "__main__":
    sys.exit(
        cookbook_main(
            "math500_ablations",
            " ".join(__doc__.split("\n\n")[:2]),
            Path(__file__).resolve().parent.parent / "tests" / "data",
        )
    )
