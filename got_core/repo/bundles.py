"""Bundles: one reproducible file holding branches, tags and notes, checked before import.

``git bundle verify`` only reads a bundle's header (and passes one cut off inside it), so the
header is checked here line by line, and the pack goes through the quarantine
(:mod:`got_core.storage.inbound`) before any ref moves (ARCHITECTURE §5, invariant 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from got_core.errors import (
    ConfigError,
    CorruptRepositoryError,
    InvalidInputError,
    InvalidNameError,
    UntrustedContentError,
)
from got_core.storage.gitcli import GitCommandError, run_git
from got_core.storage.inbound import DEFAULT_LIMITS, InboundLimits, Quarantine
from got_core.storage.refnames import check_ref_name

if TYPE_CHECKING:
    from got_core.repo.base import RepoBase as ReasoningRepo

__all__ = ["bundle", "limits_or_default", "unbundle", "verify_bundle"]


def limits_or_default(limits: InboundLimits | None) -> InboundLimits:
    """``limits``, or :data:`DEFAULT_LIMITS` when None.

    Raises:
        ConfigError: not an :class:`InboundLimits`.
    """
    if limits is None:
        return DEFAULT_LIMITS
    if not isinstance(limits, InboundLimits):
        raise ConfigError(f"limits must be an InboundLimits, not {type(limits).__name__}")
    return limits


def bundle(repo: ReasoningRepo, path: Path, refs: Sequence[str] | None = None) -> Path:
    """Write ``refs`` (default: every branch, tag and notes ref) into one bundle file.

    Raises:
        InvalidInputError: nothing to bundle.
    """
    if refs is None:
        names = sorted(n for n in repo.git.list_refs() if n.startswith(("refs/heads/", "refs/tags/", "refs/notes/")))
    else:
        names = []
        for r in refs:
            if r.startswith("refs/"):
                names.append(r)
            elif repo.git.ref_target("refs/heads/" + r):
                names.append("refs/heads/" + r)
            elif repo.git.ref_target("refs/tags/" + r):
                names.append("refs/tags/" + r)
            else:
                raise InvalidInputError(f"no branch or tag {r!r} to bundle")
    if not names:
        raise InvalidInputError("the repository has no refs to bundle yet")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_git(["bundle", "create", str(path.resolve()), *names], git_dir=repo.gitdir)
    return path


_BUNDLE_SIGNATURES = (b"# v2 git bundle\n", b"# v3 git bundle\n")
_INCOMING = "refs/got-incoming/"


def _bundle_header(path: Path, limits: InboundLimits) -> dict[str, str]:
    """Read and check a bundle's header without reading its pack: refs -> SHAs.

    ``git bundle verify`` accepts a file cut off anywhere in its ref list (it then lists
    no refs at all), so the header is checked here: the signature, every line, the blank
    line that ends it, a pack signature after it, and at least one ref.
    """
    if not path.is_file():
        raise InvalidInputError(f"no bundle file at {path}")
    shown = str(path)
    size = path.stat().st_size
    heads: dict[str, str] = {}
    with path.open("rb") as f:
        if f.readline(64) not in _BUNDLE_SIGNATURES:
            raise CorruptRepositoryError(f"{shown} is not a git bundle (no '# v2/v3 git bundle' signature)")
        while True:
            line = f.readline(8192)
            if line == b"\n":
                break
            if not line.endswith(b"\n"):
                raise CorruptRepositoryError(f"{shown} is cut short inside its header; copy the bundle again")
            if line.startswith(b"@"):
                if line.strip() not in (b"@object-format=sha1",):
                    raise CorruptRepositoryError(
                        f"{shown} needs a capability we do not support: {line.strip().decode('utf-8', 'replace')[:80]}"
                    )
                continue
            oid, _, ref = line[:-1].lstrip(b"-").partition(b" ")
            if len(oid) != 40 or any(c not in b"0123456789abcdef" for c in oid):
                raise CorruptRepositoryError(f"{shown} has a damaged header line: {line[:100]!r}")
            if line.startswith(b"-"):
                continue  # a prerequisite: git bundle verify checks we have it
            name = ref.decode("utf-8", "replace")
            if name.startswith("refs/"):
                try:
                    check_ref_name(name, "bundle ref")
                except InvalidNameError as exc:
                    raise UntrustedContentError(f"refusing {shown}: {exc}") from None
                heads[name] = oid.decode("ascii")
            if len(heads) > limits.max_objects:
                raise UntrustedContentError(
                    f"refusing {shown}: more refs than max_objects={limits.max_objects:,}", limit="max_objects"
                )
        pack = f.read(12)
        start = f.tell()
    if pack[:4] != b"PACK" or len(pack) < 12:
        raise CorruptRepositoryError(f"{shown} is cut short after its header; copy the bundle again")
    count = int.from_bytes(pack[8:12], "big")
    if count > limits.max_objects:
        raise UntrustedContentError(
            f"refusing {shown}: its pack holds {count:,} objects, over max_objects={limits.max_objects:,} "
            "(raise it with InboundLimits(max_objects=...) or --max-objects)",
            limit="max_objects",
        )
    if size - start + 12 > limits.max_total_bytes:
        raise UntrustedContentError(
            f"refusing {shown}: its pack is {size - start + 12:,} bytes, over max_total_bytes="
            f"{limits.max_total_bytes:,} (raise it with InboundLimits(max_total_bytes=...) or --max-total-bytes)",
            limit="max_total_bytes",
        )
    if not heads:
        raise CorruptRepositoryError(f"{shown} lists no refs to import (is it cut short?)")
    return heads


def _receive_bundle(q: Quarantine, path: Path) -> None:
    """Unpack a bundle into the quarantine (its objects only; checked by the caller)."""
    src = str(path.resolve())
    try:
        run_git(["bundle", "verify", "-q", src], git_dir=q.path)
        run_git(
            [
                "-c",
                "fetch.unpackLimit=1",
                "-c",
                "transfer.unpackLimit=1",
                "fetch",
                "-q",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-auto-gc",
                "--no-recurse-submodules",
                src,
                f"+refs/*:{_INCOMING}*",
            ],
            git_dir=q.path,
        )
    except GitCommandError as exc:
        said = "; ".join(line.strip() for line in exc.stderr.splitlines() if line.strip())
        raise CorruptRepositoryError(f"{path} is not a valid, intact bundle: {said[:500]}") from None


def verify_bundle(path: Path, *, limits: InboundLimits | None = None) -> dict[str, str]:
    """Check a bundle is complete, intact and acceptable; returns its refs -> SHAs.

    ``git bundle verify`` only reads the header, and passes a bundle cut off inside
    it, so the header is checked line by line, and the pack is unpacked into a scratch
    repository and put through the inbound checks of :mod:`got_core.storage.inbound` (git fsck
    --strict's object checks, our path rules, ``limits``). The bundle must be
    self-contained (no prerequisite commits).

    Raises:
        InvalidInputError: no file at ``path``.
        CorruptRepositoryError: not a valid, self-contained, intact bundle.
        UntrustedContentError: its objects break a check or a limit.
    """
    path = Path(path)
    limits = limits_or_default(limits)
    heads = _bundle_header(path, limits)
    with Quarantine(None, f"bundle {path}", limits) as q:
        _receive_bundle(q, path)
        q.check(list(q.incoming_refs().values()))
    return heads


def unbundle(repo: ReasoningRepo, path: Path, *, limits: InboundLimits | None = None) -> dict[str, str]:
    """Import every ref of a bundle, bit-identically, once all of it has been checked.

    The objects go through a quarantine (:mod:`got_core.storage.inbound`); only when every check
    passes do they move in and the refs move (a ref the bundle names is set to the
    bundle's value). On any refusal the repository is exactly as it was.

    Raises:
        InvalidInputError: no file at ``path``.
        CorruptRepositoryError: not a valid, intact bundle (or its prerequisites are missing).
        UntrustedContentError: its objects break a check or a limit.
    """
    path = Path(path)
    limits = limits_or_default(limits)
    heads = _bundle_header(path, limits)
    with Quarantine(repo.git, f"bundle {path}", limits) as q:
        _receive_bundle(q, path)
        incoming = {ref: oid for ref, oid in q.incoming_refs().items() if ref.startswith(_INCOMING)}
        q.check(list(incoming.values()))
        q.adopt()
    wanted = {"refs/" + ref[len(_INCOMING) :]: oid for ref, oid in incoming.items()}
    if wanted:
        repo.update_refs(sorted(wanted), lambda _tips: dict(wanted))
    return heads
