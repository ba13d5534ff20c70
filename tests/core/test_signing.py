"""Signing failures are typed and publish nothing (stock `git verify-commit` checks live in tests/compat)."""

from __future__ import annotations

import pytest

from got_core import Node, ReasoningRepo, SSHSigner
from got_core.errors import ConfigError, SigningError


def test_signing_failures_are_typed(tmp_path):
    with pytest.raises(ConfigError):
        SSHSigner(tmp_path / "no-such-key")
    bogus = tmp_path / "bogus"
    bogus.write_text("not a key")
    repo = ReasoningRepo.init(tmp_path / "r.git", signer=SSHSigner(bogus))
    with pytest.raises(SigningError):
        repo.commit_node(Node("cannot sign"))
    assert repo.tip("master") is None  # nothing half-written is published
