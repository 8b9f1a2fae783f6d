"""The expression tree of an SQL92 filter, and its reference evaluation.

One class per kind of expression RocketMQ's parser builds (`org.apache.rocketmq.filter.expression`),
with the same two marks its checks look at: `is_constant` (a `ConstantExpression`: a literal) and
`is_boolean` (a `BooleanExpression`: it evaluates to true, false or null). The parser desugars as
RocketMQ does: `a <> b` is `NOT (a = b)`, `a BETWEEN x AND y` is `a >= x AND a <= y`,
`a NOT BETWEEN x AND y` is `a < x OR a > y`, `a IS NOT NULL` is `NOT (a IS NULL)`, and a bare
property where a boolean is needed is a `BooleanCast` (true only for a Boolean, so never for a
property string).

`evaluate` is the reference: a direct reading of each Java class's `evaluate`, three-valued (None
is SQL's unknown, Java's null), raising `EvaluationError` where Java throws. The fast evaluator
(`compiled.py`) must agree with it on every expression and every message; property tests pin the
two together. `str()` writes an expression back as text that parses to the same tree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

from rocketlite.filter.errors import EvaluationError
from rocketlite.filter.java_values import (
    Value,
    double_compare,
    is_number,
    java_compare,
    java_equals,
    negate,
    parse_double,
)

Properties = Mapping[str, str]

COMPARISONS: dict[str, tuple[bool, bool, bool]] = {
    # operator: is it true when the comparison is (<0, 0, >0)
    ">": (False, False, True),
    ">=": (False, True, True),
    "<": (True, False, False),
    "<=": (True, True, False),
}


def compare_holds(op: str, c: int) -> bool:
    less, equal, greater = COMPARISONS[op]
    return less if c < 0 else (greater if c > 0 else equal)


def equal_values(lv: Value, rv: Value) -> Value:
    """`a = b` once both sides are evaluated (see `Equal`)."""
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is rv or java_equals(lv, rv):
        return True
    return java_compare(lv, rv) == 0


def compare_values(op: str, lv: Value, rv: Value) -> bool:
    """`a > b` (or >=, <, <=) for two non-null values (see `Compare`)."""
    if type(lv) is str and type(rv) is str:
        try:
            c = double_compare(parse_double(lv), parse_double(rv))
        except EvaluationError as exc:
            raise EvaluationError(f"it's illegal to compare strings by {op}: {exc}") from None
    else:
        c = java_compare(lv, rv)
    return compare_holds(op, c)


class Expr:
    """An expression (`Expression`)."""

    __slots__ = ()
    is_constant: ClassVar[bool] = False
    is_boolean: ClassVar[bool] = False

    def evaluate(self, props: Properties) -> Value:
        raise NotImplementedError


def quote(text: str) -> str:
    """A string literal: single quotes, each quote inside doubled (`ConstantExpression.encodeString`)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Constant(Expr):
    """A string, Integer, Long or Double literal (always >= 0: a minus sign is a `Negate`)."""

    value: Value
    is_constant: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        return self.value

    def __str__(self) -> str:
        v = self.value
        if isinstance(v, str):
            return quote(v)
        return repr(v) if isinstance(v, float) else str(int(v))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class BooleanConstant(Expr):
    """TRUE, FALSE or NULL (`BooleanConstantExpression`): a constant and a boolean expression."""

    value: bool | None
    is_constant: ClassVar[bool] = True
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        return self.value

    def __str__(self) -> str:
        return "NULL" if self.value is None else "TRUE" if self.value else "FALSE"


@dataclass(frozen=True, slots=True)
class Property(Expr):
    """A message property by name (`PropertyExpression`): its string, or null when absent."""

    name: str

    def evaluate(self, props: Properties) -> Value:
        return props.get(self.name)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Negate(Expr):
    """`-x`: a number negated; anything else (a property string too) null."""

    operand: Expr

    def evaluate(self, props: Properties) -> Value:
        v = self.operand.evaluate(props)
        return negate(v) if is_number(v) else None

    def __str__(self) -> str:
        return f"(-{self.operand})"


@dataclass(frozen=True, slots=True)
class BooleanCast(Expr):
    """A property used as a boolean: null when absent, else true only for a Boolean (never)."""

    operand: Expr
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        v = self.operand.evaluate(props)
        if v is None:
            return None
        return v if type(v) is bool else False

    def __str__(self) -> str:
        return str(self.operand)


@dataclass(frozen=True, slots=True)
class Not(Expr):
    operand: Expr
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        v = self.operand.evaluate(props)
        return None if v is None else not v

    def __str__(self) -> str:
        return f"(NOT {self.operand})"


@dataclass(frozen=True, slots=True)
class Logic(Expr):
    """AND / OR (`LogicExpression`): the left side first; the first operand equal to `decides`
    (False for AND, True for OR) is the answer; otherwise unknown if either side was."""

    left: Expr
    right: Expr
    is_boolean: ClassVar[bool] = True
    decides: ClassVar[bool]
    word: ClassVar[str]

    def evaluate(self, props: Properties) -> Value:
        lv = self.left.evaluate(props)
        if lv is self.decides:
            return lv
        rv = self.right.evaluate(props)
        if rv is self.decides:
            return rv
        return None if lv is None or rv is None else not self.decides

    def __str__(self) -> str:
        return "(" + f" {self.word} ".join(str(x) for x in chain_operands(self)) + ")"


@dataclass(frozen=True, slots=True)
class And(Logic):
    decides: ClassVar[bool] = False
    word: ClassVar[str] = "AND"


@dataclass(frozen=True, slots=True)
class Or(Logic):
    decides: ClassVar[bool] = True
    word: ClassVar[str] = "OR"


def chain_operands(node: Logic) -> list[Expr]:
    """The operands of a left-deep AND (or OR) chain, in order, found without recursion: the
    parser's loops build `a AND b AND c` as `(a AND b) AND c`, thousands deep if need be."""
    kind, right = type(node), []
    current: Expr = node
    while type(current) is kind:
        right.append(current.right)
        current = current.left
    return [current, *reversed(right)]


@dataclass(frozen=True, slots=True)
class Equal(Expr):
    """`a = b`. Null on the left only gives null; null on the right only gives false (Java's
    asymmetry: `'x' = missing` is false, `missing = 'x'` unknown); two nulls are equal."""

    left: Expr
    right: Expr
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        return equal_values(self.left.evaluate(props), self.right.evaluate(props))

    def __str__(self) -> str:
        return f"({self.left} = {self.right})"


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    """`x IS NULL` (RocketMQ: `x = NULL` without the checks that refuse NULL operands)."""

    operand: Expr
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        return self.operand.evaluate(props) is None

    def __str__(self) -> str:
        return f"({self.operand} IS NULL)"


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    """`>`, `>=`, `<`, `<=`: null when either side is; two strings are read as Doubles (both
    must be numbers), otherwise `java_compare`."""

    op: str
    left: Expr
    right: Expr
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        lv = self.left.evaluate(props)
        if lv is None:
            return None
        rv = self.right.evaluate(props)
        if rv is None:
            return None
        return compare_values(self.op, lv, rv)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True, slots=True)
class In(Expr):
    """`prop [NOT] IN ('a', 'b')`: null when the property is absent (NOT IN too)."""

    operand: Property
    values: tuple[str, ...]
    negated: bool
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        v = self.operand.evaluate(props)
        if type(v) is not str:
            return None
        return (v in self.values) != self.negated

    def __str__(self) -> str:
        items = ", ".join(quote(v) for v in self.values)
        return f"({self.operand} {'NOT IN' if self.negated else 'IN'} ({items}))"


STRING_TESTS = {"CONTAINS": str.__contains__, "STARTSWITH": str.startswith, "ENDSWITH": str.endswith}


@dataclass(frozen=True, slots=True)
class StringTest(Expr):
    """`x [NOT] CONTAINS|STARTSWITH|ENDSWITH 's'`: false (never null) when x is not a string or
    is absent, and false for an empty 's', with NOT as without."""

    op: str
    operand: Expr
    search: str
    negated: bool
    is_boolean: ClassVar[bool] = True

    def evaluate(self, props: Properties) -> Value:
        if not self.search:
            return False
        v = self.operand.evaluate(props)
        if type(v) is not str:
            return False
        return STRING_TESTS[self.op](v, self.search) != self.negated

    def __str__(self) -> str:
        return f"({self.operand} {'NOT ' if self.negated else ''}{self.op} {quote(self.search)})"


def property_names(tree: Expr) -> frozenset[str]:
    """The names of the properties an expression reads (walked without recursion)."""
    names: set[str] = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Property):
            names.add(node.name)
            continue
        stack.extend(v for f in fields(node) if isinstance(v := getattr(node, f.name), Expr))  # type: ignore[arg-type]
    return frozenset(names)
