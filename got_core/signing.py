"""Signed reasoning traces: SSH and OpenPGP commit signatures (ARCHITECTURE §1, "signed trace").

Signatures are made by the stock tools git itself uses (``ssh-keygen -Y sign``,
``gpg -bsau``) over the exact commit payload, and stored in the commit's
``gpgsig`` header, so ``git verify-commit`` checks them with no help from us.
The caller names the key explicitly; the user's git config is never consulted.

Verification reports four verdicts per commit: ``good``, ``bad`` (the signature
does not match the content, or an object it vouches for is damaged: tampered),
``unknown-key`` (a valid signature by a key that is not trusted) and ``unsigned``.
A signature covers the commit object, which names its tree by hash; so for every
signed commit each tree and blob under it is read back raw and hashed again, and a
missing or altered one makes the verdict ``bad`` with its path (what ``git fsck``
would find, reported per signed commit).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from got_core.errors import ConfigError, SigningError

__all__ = ["GPGSigner", "SSHSigner", "Signer", "TrustStore", "verify_signature"]


class Signer(Protocol):
    """Signs commit payloads; ``format`` is ``ssh`` or ``openpgp`` (git's gpg.format)."""

    format: str

    def sign(self, payload: str) -> str:
        """Return an armored detached signature of ``payload``."""
        ...


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise ConfigError(f"signing needs `{name}` on PATH")
    return exe


def _run(cmd: list[str], data: bytes, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = dict(os.environ)
    full_env.update({"SSH_ASKPASS": "", "DISPLAY": "", "GPG_TTY": ""})
    if env:
        full_env.update(env)
    try:
        return subprocess.run(cmd, input=data, capture_output=True, timeout=60, env=full_env)
    except subprocess.TimeoutExpired:
        raise SigningError(f"{cmd[0]} did not finish within 60 s (a passphrase prompt?)") from None


@dataclass
class SSHSigner:
    """Sign with an SSH private key file (``ssh-keygen -Y sign -n git``).

    Args:
        key_path: the private key (unencrypted, or loaded in ssh-agent).
    """

    key_path: str | Path
    format: str = "ssh"

    def __post_init__(self) -> None:
        self.key_path = Path(self.key_path).expanduser()
        if not Path(self.key_path).is_file():
            raise ConfigError(f"SSH signing key {self.key_path} does not exist")

    def sign(self, payload: str) -> str:
        """Armored SSH signature of ``payload`` in the ``git`` namespace.

        Raises:
            SigningError: ssh-keygen refused (wrong key, passphrase needed).
        """
        proc = _run(
            [_tool("ssh-keygen"), "-q", "-Y", "sign", "-f", str(self.key_path), "-n", "git"], payload.encode("utf-8")
        )
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0 or "BEGIN SSH SIGNATURE" not in out:
            raise SigningError(
                f"ssh-keygen could not sign with {self.key_path}: {proc.stderr.decode('utf-8', 'replace').strip()}"
            )
        return out


@dataclass
class GPGSigner:
    """Sign with an OpenPGP key from a keyring (``gpg -bsau <key>``).

    Args:
        key_id: key id, fingerprint or user id.
        gnupghome: keyring directory (default: gpg's own).
    """

    key_id: str
    gnupghome: str | Path | None = None
    format: str = "openpgp"

    def sign(self, payload: str) -> str:
        """Armored detached OpenPGP signature of ``payload``.

        Raises:
            SigningError: gpg refused (unknown key, passphrase needed).
        """
        cmd = [_tool("gpg"), "--batch", "--yes", "--status-fd=2", "-bsau", self.key_id]
        env = {"GNUPGHOME": str(self.gnupghome)} if self.gnupghome else None
        proc = _run(cmd, payload.encode("utf-8"), env)
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0 or "BEGIN PGP SIGNATURE" not in out:
            raise SigningError(
                f"gpg could not sign with {self.key_id}: {proc.stderr.decode('utf-8', 'replace').strip()[-500:]}"
            )
        return out


@dataclass
class TrustStore:
    """Which keys count as trusted when verifying.

    Args:
        allowed_signers: an SSH allowed-signers file (git's ``gpg.ssh.allowedSignersFile``).
        gnupghome: an OpenPGP keyring directory.
    """

    allowed_signers: str | Path | None = None
    gnupghome: str | Path | None = None


#: What a signature check concludes (a commit without a signature is ``unsigned``, decided before).
Verdict = Literal["good", "bad", "unknown-key"]


def _verify_ssh(payload: bytes, signature: bytes, trust: TrustStore) -> tuple[Verdict, str, str]:
    keygen = _tool("ssh-keygen")
    with tempfile.TemporaryDirectory() as tmp:
        sig = Path(tmp) / "sig"
        sig.write_bytes(signature)
        check = _run([keygen, "-Y", "check-novalidate", "-n", "git", "-s", str(sig)], payload)
        if check.returncode != 0:
            return "bad", "", check.stderr.decode("utf-8", "replace").strip() or "signature does not match"
        if trust.allowed_signers is None or not Path(trust.allowed_signers).is_file():
            return "unknown-key", "", "no allowed-signers file to trust any key"
        find = _run([keygen, "-Y", "find-principals", "-s", str(sig), "-f", str(trust.allowed_signers)], b"")
        principals = [p for p in find.stdout.decode("utf-8", "replace").split() if p]
        if find.returncode != 0 or not principals:
            return "unknown-key", "", "signed by a key that is not in the allowed-signers file"
        verify = _run(
            [
                keygen,
                "-Y",
                "verify",
                "-f",
                str(trust.allowed_signers),
                "-I",
                principals[0],
                "-n",
                "git",
                "-s",
                str(sig),
            ],
            payload,
        )
        if verify.returncode != 0:
            return "bad", principals[0], verify.stderr.decode("utf-8", "replace").strip()
        return "good", principals[0], verify.stdout.decode("utf-8", "replace").strip()


def _verify_gpg(payload: bytes, signature: bytes, trust: TrustStore) -> tuple[Verdict, str, str]:
    gpg = _tool("gpg")
    env = {"GNUPGHOME": str(trust.gnupghome)} if trust.gnupghome else None
    with tempfile.TemporaryDirectory() as tmp:
        sig = Path(tmp) / "sig.asc"
        sig.write_bytes(signature)
        proc = _run([gpg, "--batch", "--status-fd=1", "--verify", str(sig), "-"], payload, env)
    status = proc.stdout.decode("utf-8", "replace")
    for line in status.splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[0] != "[GNUPG:]":
            continue
        if fields[1] == "GOODSIG":
            return "good", " ".join(fields[3:]), line
        if fields[1] == "BADSIG":
            return "bad", " ".join(fields[3:]), line
        if fields[1] in ("NO_PUBKEY", "ERRSIG"):
            return "unknown-key", fields[2] if len(fields) > 2 else "", line
    return "bad", "", status.strip() or proc.stderr.decode("utf-8", "replace").strip()


def verify_signature(payload: bytes, signature: bytes, trust: TrustStore) -> tuple[Verdict, str, str]:
    """Check one signature over ``payload``: returns (verdict, signer, detail).

    Raises:
        ConfigError: the needed tool (ssh-keygen / gpg) is missing.
    """
    if b"BEGIN SSH SIGNATURE" in signature:
        return _verify_ssh(payload, signature, trust)
    if b"BEGIN PGP SIGNATURE" in signature:
        return _verify_gpg(payload, signature, trust)
    return "bad", "", "unrecognised signature format"
