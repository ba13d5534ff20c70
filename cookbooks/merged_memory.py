#!/usr/bin/env python3
"""Merged memory across agents (§6.3 of arXiv 2606.14470, Table 9 row 11), one command.

N worker processes clone a central bare repository and learn disjoint domains; the
orchestrator merges (0 conflicts); K planted contradictions surface as K conflicts while
the concatenation control keeps them silently; keyed vs content-hashed lesson layouts;
then the pre-registered accuracy phase (merged vs solo vs concatenation, paired CIs).

    python cookbooks/merged_memory.py --standin --out runs/merged

Same as ``python -m got_core.bench.merged_memory``; see ``--help``.
"""

import sys

from got_core.bench.merged_memory import main

if __name__ == "__main__":
    sys.exit(main())
