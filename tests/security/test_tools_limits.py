"""Every solver tool call is bounded in wall-clock time and memory.

The calculator used to run in-process with no clock (its declared 5 s limit was never
enforced: ``lcm`` of 64 huge integers ran past it); now every tool runs in a worker
process killed at its deadline, under RLIMIT_AS / RLIMIT_CPU, and each step of the
calculator is size-checked so its honest worst case is far below the limit.
"""

from __future__ import annotations

import math

import pytest

from got_core.errors import ConfigError
from got_core.solver import tools as tools_mod
from got_core.solver.tools import TOOLS, calculate, get_tools

PRIMES = [p for p in range(3, 400) if all(p % d for d in range(2, int(p**0.5) + 1))][:64]
#: 64 coprime integers just under the 13,000-bit limit: their lcm is ~830,000 bits.
HUGE_LCM = "lcm(" + ",".join(f"{p}**{int(12_900 / math.log2(p))}" for p in PRIMES) + ")"
#: a valid input near the length limit that does a fraction of a second of real work.
HEAVY = "max(" + ",".join(["max(" + ",".join(["comb(4999,2400)"] * 40) + ")"] * 15) + ")"


def test_lcm_of_huge_integers_is_refused_at_the_first_step_over_the_limit():
    with pytest.raises(tools_mod.ToolLimitError, match="13000 bits"):
        calculate(HUGE_LCM)
    result = TOOLS["calculator"].run(HUGE_LCM)
    assert (result.ok, result.error_type) == (False, "ToolLimitError")
    assert calculate("lcm(4, 6, 10)") == "60"
    with pytest.raises(tools_mod.ToolLimitError, match="literal"):
        calculate("1" * 4_000)  # a 4,000-digit literal is over the integer limit too


@pytest.mark.parametrize(
    "name, text",
    [
        ("calculator", HEAVY),
        ("sympy", "expand (x + y + z + w)**120"),
        ("lp", "maximize 3x + 2y subject to x + y <= 4; x + 3y <= 6; x, y >= 0; integer x, y"),
    ],
)
def test_each_tool_is_stopped_at_its_declared_limit_and_recovers(name, text):
    normal = TOOLS[name]
    assert normal.run(
        "1 + 1"
        if name == "calculator"
        else "solve x - 1 = 0"
        if name == "sympy"
        else "maximize x subject to x <= 1; x >= 0"
    ).ok  # the worker is up before the clock
    # a declared limit no real call can meet: the call must come back as a timeout, not a result
    strict = get_tools([name], timeout=0.001)[0]
    result = strict.run(text)
    assert (result.ok, result.error_type) == (False, "ToolTimeoutError"), result
    assert "within 0.001 s" in result.error
    assert normal.run(
        "2 * 3"
        if name == "calculator"
        else "solve x - 2 = 0"
        if name == "sympy"
        else "maximize x subject to x <= 2; x >= 0"
    ).ok  # a fresh worker answers again


def test_the_calculators_honest_worst_case_fits_its_limit():
    result = TOOLS["calculator"].run(HEAVY)
    assert result.ok and result.output == str(math.comb(4999, 2400))


def test_a_runaway_allocation_hits_the_memory_limit_as_a_typed_error():
    tool = get_tools(["sympy"], timeout=300.0, memory_mb=256)[0]
    result = tool.run("expand (a + b + c + d + e)**60")
    assert (result.ok, result.error_type) == (False, "ToolLimitError"), result
    assert "memory" in result.error
    assert TOOLS["sympy"].run("solve x - 3 = 0").output == "x = 3"  # replaced by a fresh worker


def test_limit_knobs_are_validated():
    assert [t.memory_mb for t in get_tools(["calculator", "sympy"], memory_mb=128)] == [128, 128]
    assert [t.memory_mb for t in get_tools()] == [512, 4096, 4096]
    for bad in (0, 10, -1, 1.5, True):
        with pytest.raises(ConfigError):
            get_tools(memory_mb=bad)
    with pytest.raises(ConfigError):
        get_tools(timeout=float("nan"))
