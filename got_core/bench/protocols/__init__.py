"""The paper's experiments as library functions (§4–§6, Tables 6–8 of arXiv 2606.14470).

1. :func:`five_substrates` — controlled transfer (§4): study, distil answer-free lessons,
   every backend ingests the same lessons, test read-only (or ``memory_mode="online"``:
   the memory accumulates over the test stream). One table per benchmark.
2. :func:`copyability_sweep` — §5, Table 7, Fig. 3: one worked example per question at five
   similarity tiers built by construction from a separate corpus.
3. :func:`test_time_arms` — §6.2: every test-time arm vs greedy, knobs swept, tokens.
4. :func:`system_comparison` — §6, Table 8: per-arm budgets, timeouts, the compute-matched control.
5. :func:`math500_ablations` — Table 6, Fig. 2: the nine arms plus content arms and the online arm.

Each writes a run directory (:mod:`got_core.bench.runner`), the results and tables
(:mod:`got_core.bench.report`), the plots (:mod:`got_core.bench.plots`), and records in
``config.json`` what the audit (:mod:`got_core.bench.audit`) must check. ``--prereg``
commits a decision rule before the first model call (:mod:`got_core.bench.prereg`).

Modules: ``common`` (options, config, finish), ``five_substrates``, ``online`` (accumulating
memory), ``copyability``, ``test_time``, ``ablations``, ``cli`` (the cookbooks' parser).
"""

from got_core.bench.protocols.ablations import ABLATION_ARMS, math500_ablations, render_content
from got_core.bench.protocols.cli import (
    COOKBOOK_DEFAULTS,
    EXPERIMENTS,
    cookbook_main,
    cookbook_parser,
    options_from_args,
    run_experiment,
)
from got_core.bench.protocols.common import METHODS, ExperimentOptions, ExperimentResult, load_pool, resolve_method
from got_core.bench.protocols.copyability import (
    TIER_BANDS,
    TIERS,
    build_tiers,
    copyability_sweep,
    paraphrase,
    paraphrase_ok,
    worked_example,
)
from got_core.bench.protocols.five_substrates import distill_lessons, five_substrates, ingest
from got_core.bench.protocols.online import check_online_stream, run_streams
from got_core.bench.protocols.test_time import (
    PUBLISHED_BUDGETS,
    SYSTEM_ARMS,
    expand_arms,
    parse_arm_options,
    parse_budgets,
    system_comparison,
    test_time_arms,
)

__all__ = [
    "ABLATION_ARMS",
    "COOKBOOK_DEFAULTS",
    "EXPERIMENTS",
    "METHODS",
    "PUBLISHED_BUDGETS",
    "SYSTEM_ARMS",
    "TIERS",
    "TIER_BANDS",
    "ExperimentOptions",
    "ExperimentResult",
    "build_tiers",
    "check_online_stream",
    "cookbook_main",
    "cookbook_parser",
    "copyability_sweep",
    "distill_lessons",
    "expand_arms",
    "five_substrates",
    "ingest",
    "load_pool",
    "math500_ablations",
    "options_from_args",
    "paraphrase",
    "paraphrase_ok",
    "parse_arm_options",
    "parse_budgets",
    "render_content",
    "resolve_method",
    "run_experiment",
    "run_streams",
    "system_comparison",
    "test_time_arms",
    "worked_example",
]
