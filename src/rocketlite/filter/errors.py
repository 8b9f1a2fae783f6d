"""The two ways an SQL92 filter fails, as RocketMQ's broker tells them apart.

`FilterSyntaxError`: the expression does not compile (RocketMQ's `MQFilterException` out of
`SelectorParser.parse`). A broker refuses the subscription with SUBSCRIPTION_PARSE_FAILED (23),
the code the error carries, so raising it is enough to give a client RocketMQ's answer.

`EvaluationError`: a compiled expression hits what is a Java runtime exception in RocketMQ
(`NumberFormatException` when a property is compared with a number it does not spell,
`ClassCastException` for `TRUE = prop`). RocketMQ's `ExpressionMessageFilter` logs it and treats the
message as not matching, so `Sql92Filter.matches` answers False; `Sql92Filter.evaluate` lets it
through for callers (and tests) that want to know why.
"""

from __future__ import annotations

import re

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # JavaCC's SimpleCharStream counts all three


def line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of `offset` in `text`."""
    line, start = 1, 0
    for m in _LINE_BREAK.finditer(text, 0, offset):
        line, start = line + 1, m.end()
    return line, offset - start + 1


class FilterSyntaxError(RocketliteError):
    """An SQL92 expression that RocketMQ's parser refuses; names the cause and where it is."""

    code = ResponseCode.SUBSCRIPTION_PARSE_FAILED

    def __init__(self, reason: str, expression: str, offset: int) -> None:
        self.reason = reason
        self.expression = expression
        self.offset = offset
        self.line, self.column = line_column(expression, offset)
        super().__init__(f"invalid SQL92 expression: {reason} at line {self.line}, column {self.column}")


class EvaluationError(RocketliteError):
    """What RocketMQ meets as a runtime exception while evaluating: the message does not match."""
