"""The ``got`` command line (typer + rich).

``got log`` / ``show`` / ``diff`` / ``replay`` / ``grep`` / ``tags`` / ``verify`` /
``bundle`` / ``unbundle`` / ``merge`` / ``fsck`` / ``demo`` work on any reasoning
repository (``--repo``, or ``$GOT_REPO``, default ``./got.git``). Listings take
``--json`` for scripts. Other packages add command groups through the
``got.cli`` entry-point group (e.g. ``got threads`` from the LangGraph adapter),
so the core never imports a framework.
"""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.metadata import entry_points

import typer

from got_core.cli.plugin import app, err_console
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``got``: runs the app, turning our errors into clear messages.

    Returns the exit status: 0 on success, 2 for a usage or input problem, 1 for a failure.
    """
    _load_plugins()
    try:
        rv = app(args=argv, prog_name="got", standalone_mode=False)
    except GotUserError as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        return 2
    except GotError as exc:
        err_console.print(f"[bold red]failed:[/] {exc}")
        return 1
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        err_console.print("aborted")
        return 1
    except Exception as exc:  # usage errors (typer vendors its own click: match by shape)
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            return code
        raise
    return rv if isinstance(rv, int) else 0


def _console_main() -> None:  # pragma: no cover - console_scripts shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    _console_main()
