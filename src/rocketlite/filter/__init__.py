"""SQL92 message filters, as RocketMQ's broker evaluates them (`MessageSelector.bySql`).

Sans-IO: an expression in, a filter out, and the filter answers for one message's properties.

    >>> from rocketlite.filter import compile
    >>> f = compile("TAGS IN ('TagA', 'TagB') AND price > 100")
    >>> f.matches({"TAGS": "TagA", "price": "250"})
    True

`lexer` (tokens) → `parser` (grammar and RocketMQ's build-time checks) → `nodes` (the tree and its
reference evaluation) → `compiled` (the fast evaluator) → `sql92` (`compile`, `Sql92Filter`).
`java_values` holds the Java semantics they share: Integer/Long/Double literals, how a property
string is read as a number, and how two values compare. docs/sql92.md is the user's page.
"""

from rocketlite.filter.errors import EvaluationError, FilterSyntaxError
from rocketlite.filter.sql92 import SQL92, Sql92Filter, compile

__all__ = ["SQL92", "EvaluationError", "FilterSyntaxError", "Sql92Filter", "compile"]
