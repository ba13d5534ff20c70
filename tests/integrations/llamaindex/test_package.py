"""The package surface: pinned names, a light CLI, and the missing-extra guard."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import got_integrations.llamaindex as pkg


def test_public_names_are_pinned_and_resolve():
    assert sorted(pkg.__all__) == [
        "GitChatStore",
        "GitMemory",
        "LessonMemoryBlock",
        "ScriptedFunctionCallingLLM",
        "ScriptedToolCall",
        "UnsupportedOptionError",
    ]
    for name in pkg.__all__:
        assert getattr(pkg, name).__name__ == name


def test_package_and_cli_import_without_llama_index():
    code = (
        "import sys, json, got_integrations.llamaindex, got_integrations.llamaindex.cli; "
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('llama_index'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_missing_extra_names_the_extra():
    code = textwrap.dedent("""
        import sys
        sys.modules["llama_index"] = None  # as if llama-index-core were not installed
        from got_core.errors import MissingExtraError
        import got_integrations.llamaindex as pkg
        for attempt in (lambda: pkg.GitMemory, lambda: __import__("got_integrations.llamaindex.memory")):
            try:
                attempt()
            except MissingExtraError as exc:
                print(exc.extra, "gitofthoughts[llamaindex]" in str(exc))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["llamaindex", "True", "llamaindex", "True"]
