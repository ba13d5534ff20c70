"""Verification of a history: signatures, and the objects a signature vouches for.

A signature covers a commit, and the commit names its tree by hash: so for every signed
commit each tree and blob under it is read back and hashed, and a flipped byte anywhere
under it makes the verdict ``bad`` with the path. Signatures themselves are checked by
:func:`got_core.signing.verify_signature` (``ssh-keygen`` / ``gpg``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from got_core.errors import CorruptRepositoryError
from got_core.signing import TrustStore, verify_signature
from got_core.storage.git import GitRepo
from got_core.types import VerifyResult

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase

__all__ = ["verify_history"]


def verify_history(
    repo: RepoBase, rev: str | None, *, trust: TrustStore, limit: int | None = None
) -> list[VerifyResult]:
    """Signature verdict for every commit reachable from ``rev`` (None: every ref), newest first.

    A signature covers the commit, and the commit names its tree by hash, so for every
    signed commit each tree and blob under it is read back and hashed: one that is
    missing or no longer hashes to its id turns the verdict into ``bad``, with the path
    in ``path`` and ``detail``. A commit object that is itself damaged is ``bad`` too
    (its parents cannot be followed from it).
    """
    git = GitRepo(repo.gitdir, create=False)  # a fresh handle: libgit2 caches objects it has read
    if rev is None:
        tips = [t for o in git.list_refs().values() if (t := git.peel_to_commit(o))]
    else:
        tips = [repo.resolve(rev)]
    checked: dict[str, str | None] = {}  # object -> problem, shared by every commit that holds it
    results: list[VerifyResult] = []
    for oid in _history(git, tips):
        if isinstance(oid, VerifyResult):
            results.append(oid)
        else:
            results.append(_verdict(git, oid, trust, checked))
        if limit is not None and len(results) >= limit:
            break
    return results


def _verdict(git: GitRepo, oid: str, trust: TrustStore, checked: dict[str, str | None]) -> VerifyResult:
    problem, _raw = git.object_problem(oid, "commit")
    if problem is not None:
        return VerifyResult(oid, "bad", "", f"commit {oid[:12]} {problem}", path="")
    sig, payload = git.commit_signature(oid)
    if not sig:
        return VerifyResult(oid, "unsigned", "", "no signature")
    status, signer, detail = verify_signature(payload or b"", sig, trust)
    damaged = git.damaged_under(git.read_commit(oid).tree, checked)
    if damaged:
        path, bad_oid, why = damaged[0]
        where = repr(path) if path else "the root tree"
        more = f" (and {len(damaged) - 1} more damaged object(s))" if len(damaged) > 1 else ""
        detail = (
            f"object {bad_oid[:12]} at {where} {why}{more}; the signature no longer vouches for "
            "this commit's content: restore the object from a copy (a bundle or a peer)"
        )
        return VerifyResult(oid, "bad", signer, detail, path=path)
    return VerifyResult(oid, status, signer, detail)


def _history(git: GitRepo, tips: list[str]) -> Iterator[str | VerifyResult]:
    """Commits reachable from ``tips``, newest first; a walk stopped by a damaged commit
    goes on by hand, yielding a ``bad`` verdict for each commit that cannot be read."""
    done: list[str] = []
    try:
        for c in git.walk(tips, topo=True):
            done.append(c.oid)
            yield c.oid
        return
    except CorruptRepositoryError:
        pass
    walked = set(done)  # already yielded by the walk; their parents still need following
    seen: set[str] = set()
    stack = list(reversed(tips))
    while stack:
        oid = stack.pop()
        if oid in seen:
            continue
        seen.add(oid)
        problem, raw = git.object_problem(oid, "commit")
        if problem is not None:
            yield VerifyResult(
                oid,
                "bad",
                "",
                f"commit {oid[:12]} {problem}; the history behind it "
                "cannot be followed: restore it from a copy (a bundle or a peer)",
            )
            continue
        if oid not in walked:
            yield oid
        header = (raw or b"").split(b"\n\n", 1)[0]
        parents = [line[7:].decode("ascii", "replace") for line in header.split(b"\n") if line.startswith(b"parent ")]
        stack.extend(reversed(parents))
