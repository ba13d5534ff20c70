"""``got solve``: answer one question with a test-time arm; every node a commit (§3.2, §6.2).

    got solve "What is 17 * 23?" --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct
    got solve "Which gas ...?" -c "Argon" -c "Neon" -c "Xenon" -c "Radon" --memory git --arm tot
    got solve "What is 2 + 2?" --scripted replies.json      # no server: replies from a JSON file

Prints the answer, the tree (scores, tags) and the repository path. With no
reachable server it says how to start one and exits with status 2. The module
imports the solver only when the command runs, so ``got --help`` stays fast.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.tree import Tree

from got_core.cli.plugin import (
    Abbrev,
    check_target,
    console,
    created_on_failure_removed,
    emit_json,
    err_console,
    one_line,
    require_positive,
    safe,
)
from got_core.errors import ConfigError, InvalidInputError
from got_core.names import short_ref
from got_core.repo import ReasoningRepo

__all__ = ["failure_reason", "load_script", "register", "render_tree", "solve_command"]


def load_script(path: Path) -> Any:
    """A :class:`~got_core.solver.scripted.ScriptedChatModel` from a scripted-replies JSON file.

    The format (documented in :mod:`got_core.solver.scripted`): a list of replies (used
    in order), or an object ``{"rules": [[regex, reply], ...], "replies": [...], "default": reply}``.

    Raises:
        InvalidInputError: the file is missing, unreadable, not JSON, or not of that shape.
    """
    from got_core.solver.scripted import ScriptedChatModel

    return ScriptedChatModel.from_file(path)


def _explain(reason: str, error: str) -> str:
    """Why one node stopped, in words."""
    if reason == "timeout":
        return "the time budget ran out (raise --timeout)"
    if reason == "budget":
        return "the token budget ran out (raise --token-cap)"
    if "no reply left" in error:
        return "the scripted model had no reply left (add replies, rules or a default to the --scripted file)"
    if any(s in error for s in ("cannot reach", "no model server", "answered HTTP")) or "refused" in error.lower():
        return f"the endpoint refused the call ({error[:160]})"
    return f"the model call failed ({error[:160]})" if error else f"the node stopped ({reason})"


def failure_reason(result: Any) -> str:
    """One line saying why a run found no answer: how many nodes stopped, and why.

    Reads the nodes' traces (the ``stopped`` step the engine records) and their
    validation failures, so the reason is the one stored in the repository.
    """
    why: Counter[str] = Counter()
    for node in result.nodes:
        if node.depth == 0:
            continue
        stopped = [s for s in node.trace if isinstance(s, dict) and s.get("type") == "stopped"]
        if stopped:
            why[_explain(str(stopped[-1].get("reason", "")), str(stopped[-1].get("error") or ""))] += 1
        elif node.metadata.get("failure"):
            why[f"no valid answer ({node.metadata['failure']})"] += 1
        else:
            why["no answer extracted"] += 1
    total = sum(why.values())
    if not total:
        return f"no answer (outcome {result.outcome}): no node finished"
    parts = [f"{n} of {total} node{'s' if total != 1 else ''}: {text}" for text, n in why.most_common()]
    return f"no answer (outcome {result.outcome}); " + "; ".join(parts)


def _check_url(base_url: str) -> None:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(f"--base-url {base_url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000/v1")


def render_tree(result: Any, abbrev: Abbrev | None = None) -> Tree:
    """A rich tree of a :class:`~got_core.solver.run.SolveResult`: scores, answers, outcomes, tags.

    Commit ids are abbreviated as git does (``abbrev``; default: against the run's repository).
    """
    if abbrev is None:
        abbrev = Abbrev(ReasoningRepo(result.repo_path, create=False))
    head = (
        f"[bold]{escape(result.problem_id)}[/] · arm [cyan]{escape(result.arm)}[/] · "
        f"outcome [bold]{escape(result.outcome)}[/]"
    )
    tree = Tree(head)
    branches: dict[str, Tree] = {}
    winner = result.winner.oid if result.winner else None
    for entry in result.tree:
        s = entry.scores
        if entry.depth == 0:
            label = f"[dim]{abbrev(entry.oid)}[/] [bold]root[/] (the problem)"
        else:
            score = f"s={s.get('s_comb', 0):.3f} (local {s.get('s_local', 0):.2f}, cross {s.get('s_cross', 0):.2f})"
            answer = entry.answer if entry.answer is not None else "—"
            label = f"[dim]{abbrev(entry.oid)}[/] [bold]{escape(entry.label)}[/] answer {escape(str(answer))}  {score}"
            if entry.outcome:
                colour = "green" if entry.outcome == "success" else "red"
                label += f"  [{colour}]{escape(entry.outcome)}[/]"
        if entry.tags:
            label += f"  [yellow]{escape(', '.join(entry.tags))}[/]"
        if entry.oid == winner:
            label += "  [bold green]← winner[/]"
        parent = branches.get(entry.parent or "", tree)
        branches[entry.oid] = parent.add(label)
    return tree


def _model(base_url: str, model: str | None, api_key: str, scripted: Path | None, timeout: float) -> Any:
    """The chat model: the scripted replies, or the endpoint (checked now: a dead one fails at once).

    Raises:
        ModelError: no server answers at ``base_url`` (the message says how to start one).
        ConfigError: the server lists no model and none was named.
    """
    if scripted is not None:
        return load_script(scripted)
    from got_core.solver.openai_compat import OpenAICompatibleModel, check_endpoint

    _check_url(base_url)
    served = check_endpoint(base_url, api_key=api_key if api_key != "EMPTY" else None)
    name = model or (served[0] if served else None)
    if not name:
        raise ConfigError(f"{base_url} lists no models; pass --model")
    return OpenAICompatibleModel(base_url, name, api_key=api_key, timeout=min(timeout, 600.0))


def solve_command(
    question: str = typer.Argument(..., help="The question (for multiple choice, without the options)."),
    choice: list[str] | None = typer.Option(
        None, "--choice", "-c", help="An option; repeat it for each (A, B, C, D...)."
    ),
    base_url: str = typer.Option(
        "http://127.0.0.1:8000/v1",
        "--base-url",
        envvar="GOT_BASE_URL",
        help="An OpenAI-compatible endpoint (vLLM: `vllm serve <model>`).",
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", envvar="GOT_MODEL", help="Served model name (default: the first the server lists)."
    ),
    api_key: str = typer.Option("EMPTY", "--api-key", envvar="GOT_API_KEY", help="API key, if the server wants one."),
    memory: str = typer.Option("none", "--memory", help="Memory backend: none, markdown, vector, graph or git."),
    memory_path: Path | None = typer.Option(
        None, "--memory-path", help="Where the memory lives (default: <repo-root>/memory-<backend>)."
    ),
    read_only_memory: bool = typer.Option(False, "--read-only-memory", help="Read lessons, write none."),
    repo_root: Path = typer.Option(
        Path("got-solve"),
        "--repo-root",
        envvar="GOT_SOLVE_ROOT",
        help="One repository per problem is created under it.",
    ),
    arm: str = typer.Option("tot", "--arm", help="greedy, self_consistency, argue, revision, verifier_bon or tot."),
    n: int | None = typer.Option(None, "--n", min=1, help="Samples for self_consistency / verifier_bon."),
    problem_id: str | None = typer.Option(None, "--problem-id", help="Default: a hash of the question."),
    tools: str = typer.Option("calculator,sympy,lp", "--tools", help="Comma-separated tool names ('' for none)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Wall-clock budget for the question, in seconds."),
    token_cap: int = typer.Option(200_000, "--token-cap", min=1, help="Token budget for the question (all calls)."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Completion limit per model call."),
    temperature: float | None = typer.Option(None, "--temperature", help="Override the arm's temperature."),
    seed: int | None = typer.Option(None, "--seed", help="Base seed (node i uses seed + i)."),
    parallel: bool | None = typer.Option(
        None, "--parallel/--sequential", help="Run sibling nodes at once (default: parallel with a server)."
    ),
    scripted: Path | None = typer.Option(
        None,
        "--scripted",
        exists=True,
        dir_okay=False,
        readable=True,
        help="Replies from a JSON file instead of a server: a list of replies used in order, or "
        '{"rules": [[regex, reply], ...], "replies": [...], "default": reply} (example: '
        "cookbooks/data/scripted_replies.json).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON for scripts instead of a tree."),
) -> None:
    """Answer a question with a tree of thoughts (or another arm); every node is a commit.

    When no answer is found it says why on stderr (the model had no reply left, the
    endpoint refused, the budget ran out...) and exits 1; the tree stays recorded.
    """
    from got_core.memory import get_backend
    from got_core.solver.budget import Budget
    from got_core.solver.run import solve

    require_positive(timeout, "--timeout")
    if temperature is not None:
        require_positive(temperature, "--temperature", zero=True)
    check_target(repo_root, "--repo-root", directory=True)
    if memory_path is not None:
        check_target(memory_path, "--memory-path", directory=True)
    chat = _model(base_url, model, api_key, scripted, timeout)
    names = [t.strip() for t in tools.split(",") if t.strip()]
    options = {"n": n} if n is not None and arm in ("self_consistency", "verifier_bon") else {}
    mem = None
    mem_path = memory_path or repo_root / f"memory-{memory.strip().lower()}"
    with created_on_failure_removed(repo_root, mem_path):  # a run that cannot start leaves nothing
        if memory.strip().lower() != "none":
            mem = get_backend(memory, path=mem_path, read_only=read_only_memory)
        try:
            result = solve(
                question,
                choice or None,
                model=chat,
                memory=mem,
                repo_root=repo_root,
                problem_id=problem_id,
                tools=names,
                budget=Budget(wall_clock_s=timeout, max_tokens=token_cap),
                arm=arm,
                seed=seed,
                temperature=temperature,
                max_tokens=max_tokens,
                arm_options=options,
                parallel=(scripted is None) if parallel is None else parallel,
            )
        finally:
            if mem is not None:
                mem.close()
    if json_out:
        emit_json(result.to_dict())
    else:
        shown = result.answer if result.answer is not None else "(no answer)"
        if result.letter and choice:
            shown = f"{result.letter}) {choice['ABCDEFGHIJKLMNOPQRSTUVWXYZ'.index(result.letter)]}"
        console.print(
            f"[bold]answer:[/] {escape(shown)}   [dim]outcome {escape(result.outcome)}, "
            f"{result.n_calls} model calls, {result.usage.total_tokens} tokens, {result.elapsed_s:.2f} s[/]"
        )
        console.print(render_tree(result), soft_wrap=False)  # wrap long labels instead of cropping them
        where = escape(str(_relative(Path(result.repo_path))))
        console.print(f"[bold]repository:[/] {where}  (winning path on {escape(short_ref(result.session_ref))})")
        if result.lesson:
            console.print(f"[bold]lesson written[/] ({escape(result.lesson_source)}): {escape(result.lesson)}")
        console.print("[dim]try:[/]")  # one command a line: each fits a narrow terminal unless the path is long
        console.print(f"[dim]  git --git-dir={where} log --all --graph --oneline[/]")
        console.print(f"[dim]  git --git-dir={where} notes --ref=got show best[/]")
    if result.answer is None:
        err_console.print(f"[bold red]failed:[/] {safe(one_line(failure_reason(result)))}")
        raise typer.Exit(1)


def _relative(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (as git prints paths)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        return path


def register(app: typer.Typer) -> None:
    """Add ``got solve`` to a Typer app (the ``got`` CLI lists it in ``_CORE_GROUPS``)."""
    app.command("solve")(solve_command)
