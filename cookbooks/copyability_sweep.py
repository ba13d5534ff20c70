#!/usr/bin/env python3
"""Copyability sweep (§5 of arXiv 2606.14470), one command.

Inject one worked example per test question into a fresh memory at five similarity
tiers — identical, paraphrase (a template rewrite), method band (the most similar
problem of the same subject), same subject (the least similar of the same domain),
unrelated (the least similar of the other kind) — measure the MiniLM cosine between
the question and the example, and report Δ vs no memory per tier and pooled by cosine
bin (table.md, bins.jsonl, sweep.png), then audit the run.

    python cookbooks/copyability_sweep.py --standin --out runs/sweep
"""

import sys
from pathlib import Path

from got_core.bench.protocols import cookbook_main

if __name__ == "__main__":
    sys.exit(
        cookbook_main(
            "copyability_sweep",
            " ".join(__doc__.split("\n\n")[:2]),
            Path(__file__).resolve().parent.parent / "tests" / "data",
        )
    )
