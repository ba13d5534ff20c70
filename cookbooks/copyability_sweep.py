#!/usr/bin/env python3
"""Copyability sweep (§5, Table 7, Fig. 3 of arXiv 2606.14470), one command.

Inject one whole worked example per test question into a fresh memory at five tiers built by
construction from a separate corpus (--tier-corpus, MATH-train format): identical, paraphrase
(written by the served model; --paraphrase file|template otherwise, the template only as a
labelled fallback), method band (same subject, MiniLM cosine in [0.60, 0.85], a different
answer), same subject and unrelated (at the paper's typical cosines 0.22 and 0.12). Reports per
tier the mean cosine, the copyable-answer count and Δ vs no memory, pooled by cosine bin
(< 0.60, 0.60–0.85, ≥ 0.85), tiers.jsonl and sweep.png (tier-mean Δ vs tier-mean cosine, τ
shaded; --overlay RUN_DIR adds other runs, e.g. another model), then audits the run.

    python cookbooks/copyability_sweep.py --standin --levels 4,5 --m-test 4 --out runs/sweep
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
