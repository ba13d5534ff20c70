#!/usr/bin/env python3
"""Cross-episode memory on ScienceWorld (Table 5 of arXiv 2606.14470; Table 9 row 3), one command.

One ReAct agent per memory backend (none, markdown, vector, graph, git) plays the same
ScienceWorld episodes (tasks x variations, interleaved) while its memory accumulates one
answer-free lesson per episode. Writes table.md (mean task score [95% CI], paired Δ vs no
memory), learning_curve.png, episodes.jsonl/csv and one git repository per arm (a branch per
episode, every step a commit, the outcome a tag) into --out. Needs `pip install -e '.[scienceworld]'`
and a Java runtime.

    python cookbooks/scienceworld_episodes.py --standin --out runs/sw          # no model: a scripted policy
    python cookbooks/scienceworld_episodes.py --base-url http://127.0.0.1:8765/v1 --model smollm2-135m \
        --tasks find-non-living-thing --variations 2 --max-steps 6 --out runs/sw-real
"""

import sys

from got_core.bench.scienceworld_run import main

if __name__ == "__main__":
    sys.exit(main())
