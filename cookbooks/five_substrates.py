#!/usr/bin/env python3
"""Five-substrate controlled transfer (§4 of arXiv 2606.14470), one command.

Study K problems with memory writes on, distil one answer-free lesson each, make every
memory backend (none, markdown, vector, graph, git) ingest the same lessons, then test M
held-out problems per backend with the memory read-only, with the paper's single-shot
retrieval-augmented agent (--method tot for the full tree of thoughts). Writes one table per
benchmark (MATH, GPQA: accuracy, Δ pp vs no memory [95% CI], *), results.jsonl/csv, arms.csv,
deltas.png into --out, then audits the run from git alone. --memory-mode online lets each
memory start empty (or from the study lessons) and accumulate the agent's verified lessons
over the test stream instead: accuracy by quartile and online.png.

    python cookbooks/five_substrates.py --standin --out runs/five            # no model needed
    python cookbooks/five_substrates.py --standin --memory-mode online --out runs/five-online
    python cookbooks/five_substrates.py --base-url http://127.0.0.1:8765/v1 --model smollm2-135m \
        --backends git,vector --n-math 5 --n-gpqa 5 --k-study 4 --m-test 6 --max-tokens 96
"""

import sys
from pathlib import Path

from got_core.bench.protocols import cookbook_main

if __name__ == "__main__":
    sys.exit(
        cookbook_main(
            "five_substrates",
            " ".join(__doc__.split("\n\n")[:2]),
            Path(__file__).resolve().parent.parent / "tests" / "data",
        )
    )
