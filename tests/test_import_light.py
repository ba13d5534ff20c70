"""`import got_core` loads no framework and no heavy ML library (ARCHITECTURE §2)."""

from __future__ import annotations

import json
import subprocess
import sys

import got_core

HEAVY = [
    "langgraph",
    "langchain",
    "langchain_core",
    "llama_index",
    "torch",
    "chromadb",
    "sentence_transformers",
    "transformers",
    "networkx",
    "sympy",
    "openai",
    "ray",
    "numpy",
]


def test_import_got_core_stays_light():
    code = (
        "import sys, json, got_core, got_core.memory, got_core.cli; print(json.dumps(sorted(m for m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    offenders = [m for m in HEAVY if m in loaded or any(x.startswith(m + ".") for x in loaded)]
    assert offenders == []


def test_public_api_is_pinned():
    assert "ReasoningRepo" in got_core.__all__ and "Node" in got_core.__all__
    for name in got_core.__all__:
        assert hasattr(got_core, name), name
    assert all(issubclass(getattr(got_core, n), got_core.GotError) for n in got_core.__all__ if n.endswith("Error"))


def test_import_got_core_testing_does_not_load_pytest():
    # the contract suites import pytest; the package resolves them only on first use
    code = (
        "import sys, got_core.testing; loaded = 'pytest' in sys.modules or '_pytest' in sys.modules; "
        "from got_core.testing import MemoryBackendContract, ChatModelContract; "
        "print(loaded, 'pytest' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
