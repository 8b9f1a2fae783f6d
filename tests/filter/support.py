"""What the filter tests share: both evaluators of a compiled filter, and a result that names errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from rocketlite.filter import EvaluationError, Sql92Filter

ERROR: Final = "ERROR"  # the outcome where RocketMQ meets a runtime exception

Outcome = bool | None | str
Evaluator = Callable[[Sql92Filter, Mapping[str, str]], object]

# The fast closures and the reference tree walk; every table runs through both.
EVALUATORS: Final[dict[str, Evaluator]] = {
    "compiled": lambda f, props: f.evaluate(props),
    "reference": lambda f, props: f.tree.evaluate(props),
}


def outcome(evaluate: Evaluator, f: Sql92Filter, props: Mapping[str, str]) -> Outcome:
    """True, False, None (unknown) or ERROR."""
    try:
        value = evaluate(f, props)
    except EvaluationError:
        return ERROR
    assert value is None or type(value) is bool, f"{f.expression} gave {value!r}"
    return value
