"""The ``got`` command line (typer + rich).

``got init`` creates a reasoning repository; ``got log`` / ``show`` / ``diff`` /
``replay`` / ``grep`` / ``tags`` / ``verify`` / ``bundle`` / ``unbundle`` / ``merge`` /
``fsck`` / ``demo`` work on any reasoning repository (``--repo``, or ``$GOT_REPO``, default ``./got.git``). Listings take
``--json`` for scripts. Other packages add command groups through the
``got.cli`` entry-point group (e.g. ``got threads`` from the LangGraph adapter),
so the core never imports a framework.
"""

from __future__ import annotations

import os
import sys
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

import typer

from got_core.cli.plugin import app, err_console, one_line, safe
from got_core.errors import GotError, GotUserError

__all__ = ["app", "main"]

# Core command modules register themselves on `app` when imported.
for _module in ("repo_cmds", "share_cmds", "demo"):
    import_module(f"got_core.cli.{_module}")

#: Command groups of the core itself: name -> "module:attr" (a Typer app, or a
#: ``register(app)`` function). Their modules import heavy libraries lazily.
_CORE_GROUPS: dict[str, str] = {
    "memory": "got_core.cli.memory:app",
    "gcc": "got_core.cli.gcc_cmds:app",
    "solve": "got_core.cli.solve:register",
    "audit": "got_core.cli.audit:register",
    "ui": "got_core.cli.ui_cmd:register",
    "bisect": "got_core.cli.bisect_cmd:register",
}


def _attach(name: str, target: str) -> None:
    module_name, _, attr = target.partition(":")
    obj = getattr(import_module(module_name), attr)
    if isinstance(obj, typer.Typer):
        app.add_typer(obj, name=name)
    elif callable(obj):
        obj(app)


_loaded = False


def _load_plugins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name, target in _CORE_GROUPS.items():
        _attach(name, target)
    for ep in entry_points(group="got.cli"):
        try:
            _attach(ep.name, ep.value)
        except ImportError:
            continue  # that adapter's extra is not installed; its commands are absent


def _say(prefix: str, message: object) -> None:
    """One line on stderr: ``prefix: message`` (markup escaped, newlines folded)."""
    err_console.print(f"[bold red]{prefix}:[/] {safe(one_line(message))}", soft_wrap=True)


def _usage_line(exc: Any) -> str:
    """A click usage error as one line: what is wrong and where to read more."""
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    path: Any = getattr(getattr(exc, "ctx", None), "command_path", None)
    where = path if isinstance(path, str) and path else "got"
    return f"{one_line(message)} (see `{where} --help`)"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``got``: runs the app, turning every error into one clear line on stderr.

    Returns the exit status: 0 on success, 2 for a usage or input problem, 1 for a failure
    (3 for merges left for review). Set ``GOT_DEBUG=1`` to see the traceback of an
    unexpected error instead of its one-line summary.
    """
    _load_plugins()
    try:
        rv = app(args=argv, prog_name="got", standalone_mode=False)
    except GotUserError as exc:
        _say("error", exc)
        return 2
    except GotError as exc:
        _say("failed", exc)
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        _say("aborted", "by the user")
        return 1
    except KeyboardInterrupt:
        _say("interrupted", "nothing after the last completed write was stored")
        return 130
    except Exception as exc:
        # click usage errors (typer vendors its own click: matched by shape, not class)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            if type(exc).__name__ == "NoArgsIsHelpError":
                show()  # `got gcc` alone: the group's help, as before
                return code
            _say("error", _usage_line(exc))
            return code
        if isinstance(exc, OSError):  # the operating system refused a read or write we expected to work
            where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
            _say("failed", f"{exc.strerror or exc}{where}")
            return 1
        if os.environ.get("GOT_DEBUG"):
            raise
        _say("failed", f"internal error ({type(exc).__name__}: {exc}); GOT_DEBUG=1 shows the traceback")
        return 1
    return rv if isinstance(rv, int) else 0


def _console_main() -> None:  # pragma: no cover - console_scripts shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    _console_main()
