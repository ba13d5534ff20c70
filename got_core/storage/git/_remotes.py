"""Fetch, push and ls-remote (a mixin of ``GitRepo``), never prompting: credentials come from
the environment and go only to listed hosts; host keys and certificates are checked."""

from __future__ import annotations

import os
from collections.abc import Callable

import pygit2
from pygit2 import GitError

from got_core.errors import CredentialsRequiredError, GotError, PushRejectedError, RemoteError
from got_core.storage.git._staging import _Staging


class _Remotes(_Staging):
    """Fetch, push and ls-remote."""

    def fetch(self, url: str, refspecs: list[str], progress: Callable[[int, int, int], None] | None = None) -> None:
        """Fetch ``refspecs`` from ``url`` (a path or URL); never prompts for credentials.

        libgit2 does the transfer in-process: nothing of the peer is executed (no
        upload-pack, hooks or config-defined commands), and a local peer's
        ``objects/info/alternates`` are followed no further than git itself would.

        Args:
            progress: called while the pack streams in with (objects announced, objects
                received, bytes received); raising aborts the fetch with that error.
        """
        self._flush_for_libgit2()
        self._remote("fetch", url, refspecs, progress)

    def push(self, url: str, refspecs: list[str]) -> None:
        """Push ``refspecs`` to ``url``; never prompts for credentials (nor runs the peer's hooks)."""
        self._flush_for_libgit2()  # the pack libgit2 builds reads every object it sends
        self._remote("push", url, refspecs)

    def ls_remote(self, url: str) -> dict[str, str]:
        """The refs ``url`` advertises -> the SHAs they point at (no objects travel).

        Raises:
            RemoteError: cannot be reached, not a repository, or it asked for credentials.
        """
        heads: dict[str, str] = {}
        try:
            remote = self._r.remotes.create_anonymous(url)
            for head in remote.list_heads(callbacks=_NoPrompt(url)):
                name = str(head.name)
                if name.startswith("refs/") and not name.endswith("^{}"):
                    heads[name] = str(head.oid)
        except GotError:
            raise
        except (GitError, OSError, KeyError) as exc:
            raise RemoteError(f"listing the refs of {url} failed: {exc}") from None
        return heads

    def _remote(
        self, verb: str, url: str, refspecs: list[str], progress: Callable[[int, int, int], None] | None = None
    ) -> None:
        try:
            remote = self._r.remotes.create_anonymous(url)
            getattr(remote, verb)(refspecs, callbacks=_NoPrompt(url, progress))
        except GotError:
            raise
        except (GitError, OSError, KeyError) as exc:
            where = "from" if verb == "fetch" else "to"
            raise RemoteError(f"{verb} {where} {url} failed: {exc}") from None


#: Credentials for remotes come only from these environment variables, set outside the agent
#: (never a prompt): an HTTPS token (with an optional user name) and an SSH private key, offered
#: only to the hosts listed in ``GOT_REMOTE_HOSTS`` (so a peer elsewhere never sees them).
TOKEN_ENV, USER_ENV, SSH_KEY_ENV, HOSTS_ENV = "GOT_REMOTE_TOKEN", "GOT_REMOTE_USER", "GOT_SSH_KEY", "GOT_REMOTE_HOSTS"


def _trusted_host(url: str) -> bool:
    from urllib.parse import urlsplit

    hosts = {h.strip().lower() for h in os.environ.get(HOSTS_ENV, "").split(",") if h.strip()}
    if "://" not in url and "@" in url:  # scp-style user@host:path
        host = url.partition("@")[2].partition(":")[0]
    else:
        host = urlsplit(url).hostname or ""
    return bool(host) and host.lower() in hosts


def _is_ssh(url: str) -> bool:
    return url.startswith(("ssh://", "ssh+git://", "git+ssh://")) or ("://" not in url and "@" in url)


class _NoPrompt(pygit2.RemoteCallbacks):
    """Remote callbacks that never prompt, reject failed ref updates, and hand transfer
    progress to an optional limit check.

    When a server asks for credentials, the only answer is what the environment holds
    (``GOT_REMOTE_TOKEN`` [+ ``GOT_REMOTE_USER``] for HTTP(S), ``GOT_SSH_KEY`` or a running
    ``ssh-agent`` for SSH), offered once and only to a host named in ``GOT_REMOTE_HOSTS``:
    asked again (refused), or with nothing configured for that host, the transfer fails at
    once with :class:`CredentialsRequiredError`. An SSH host key that ``~/.ssh/known_hosts``
    does not list for the host, or a TLS certificate that does not verify, fails with
    :class:`RemoteError` before anything is sent.
    """

    def __init__(self, url: str, progress: Callable[[int, int, int], None] | None = None) -> None:
        super().__init__()
        self._url = url
        self._progress = progress
        self._offered = False

    def credentials(self, url, username_from_url, allowed_types):
        kinds = pygit2.enums.CredentialType
        answer: object | None = None
        if not self._offered and _trusted_host(url or self._url):
            user = username_from_url or os.environ.get(USER_ENV) or "git"
            token, key = os.environ.get(TOKEN_ENV), os.environ.get(SSH_KEY_ENV)
            if allowed_types & kinds.USERPASS_PLAINTEXT and token:
                answer = pygit2.UserPass(user, token)
            elif allowed_types & kinds.SSH_KEY and key:
                pub = key + ".pub"
                answer = pygit2.Keypair(user, pub if os.path.exists(pub) else None, key, "")
            elif allowed_types & kinds.SSH_KEY and os.environ.get("SSH_AUTH_SOCK"):
                answer = pygit2.KeypairFromAgent(user)
        if answer is None:
            again = " refused the credentials configured for it" if self._offered else " asks for credentials"
            raise CredentialsRequiredError(
                f"{self._url}{again}; GitOfThoughts never prompts. Configure access outside the agent: "
                f"{TOKEN_ENV} (and {USER_ENV}) for HTTPS, {SSH_KEY_ENV} or ssh-agent for SSH, "
                f"with the host in {HOSTS_ENV}"
            )
        self._offered = True
        return answer

    def certificate_check(self, certificate, valid, host):
        # pygit2 lets every SSH host key through, whatever libgit2 found in ~/.ssh/known_hosts
        # (its pass-through): a server whose key is unknown or changed could be anyone.
        if valid:
            return True
        name = host.decode("utf-8", "replace") if isinstance(host, bytes) else str(host)
        if _is_ssh(self._url):
            raise RemoteError(
                f"{self._url}: the SSH host key of {name} is not the one ~/.ssh/known_hosts lists for it, "
                "or it is not listed; check the key and add it (ssh-keyscan), then try again"
            )
        raise RemoteError(
            f"{self._url}: the TLS certificate of {name} is not valid; nothing was sent. A server whose "
            "certificate a private CA signed: start the process with SSL_CERT_FILE=/path/to/ca.pem"
        )

    def transfer_progress(self, stats):
        if self._progress is not None:
            self._progress(stats.total_objects, stats.received_objects, stats.received_bytes)

    def push_update_reference(self, refname, message):
        if message:
            raise PushRejectedError(f"push of {refname} to {self._url} was rejected: {message}")
