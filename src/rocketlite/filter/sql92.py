"""`compile(expression) -> Sql92Filter`: RocketMQ's SQL92 message filter (`FilterFactory`'s SQL92
`SqlFilter`), compiled once and evaluated against each message's properties.

A message matches when the expression is TRUE for its properties (every property, the system
ones such as TAGS and KEYS included, as `ExpressionMessageFilter` passes them): FALSE, unknown
(a missing property) and a runtime error (a property that does not spell the number it is
compared with) all mean no match, as in RocketMQ.

Compiled filters are cached by their text, as `SelectorParser` caches its parses, since a pull
with the subscription in its header compiles the same expression again and again.
"""

from __future__ import annotations

import functools
from typing import Final

from rocketlite.filter.compiled import Fn, build
from rocketlite.filter.errors import EvaluationError, FilterSyntaxError
from rocketlite.filter.nodes import Expr, Properties, property_names
from rocketlite.filter.parser import parse

SQL92: Final = "SQL92"  # ExpressionType.SQL92, the subscription's expressionType
_CACHED: Final = 256


class Sql92Filter:
    """A compiled SQL92 expression; immutable, so one instance serves any number of threads."""

    __slots__ = ("_fn", "expression", "names", "tree")

    def __init__(self, expression: str, tree: Expr) -> None:
        self.expression = expression
        self.tree = tree
        # The properties it reads: a message whose properties string holds none of them needs no
        # full decode; it is judged as a message without properties (the answer may still be
        # TRUE: `a IS NULL`).
        self.names = property_names(tree)
        self._fn: Fn = build(tree)

    def matches(self, properties: Properties) -> bool:
        """Whether a message with these properties passes the filter."""
        try:
            return self._fn(properties) is True
        except EvaluationError:
            return False

    def evaluate(self, properties: Properties) -> bool | None:
        """The expression's value: True, False or None (unknown); raises `EvaluationError` where
        RocketMQ meets a runtime exception (and does not deliver the message)."""
        return self._fn(properties)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Sql92Filter({self.expression!r})"


def compile(expression: str) -> Sql92Filter:
    """Compile an SQL92 expression; `FilterSyntaxError` (SUBSCRIPTION_PARSE_FAILED) if invalid."""
    try:
        compiled = _compile(expression)
    except RecursionError:  # a caller deep in its own stack; not cached, as it depends on the caller
        raise FilterSyntaxError("expression is nested too deeply", expression, 0) from None
    if isinstance(compiled, FilterSyntaxError):
        raise FilterSyntaxError(compiled.reason, compiled.expression, compiled.offset)
    return compiled


@functools.lru_cache(maxsize=_CACHED)
def _compile(expression: str) -> Sql92Filter | FilterSyntaxError:
    """The filter, or the error (kept too, as RocketMQ's parse cache keeps its exceptions)."""
    try:
        return Sql92Filter(expression, parse(expression))
    except FilterSyntaxError as exc:
        return exc
