"""The fast evaluator: an expression tree turned once into nested closures.

The reference (`Expr.evaluate`) walks the tree and converts values generically at every node. A
filter on the pull path runs once per message, so `build` decides at compile time what can be
decided then:

- a side that is the same for every message (a literal, a negated literal, a negated property,
  which is always null) is computed once, and a comparison between two such sides is a constant
  (or a constant error);
- `property <op> literal` and `literal <op> property`, the common shapes, get a closure that reads
  the property and converts it the one way the literal's class asks for (`Integer.valueOf` for an
  Integer literal, ...), with Java's null rules spelled out for that shape;
- AND and OR chains are flattened into one loop (same order, same short-circuits, same unknowns)
  and `NOT NOT x` is `x`, so a long chain costs no deep recursion;
- everything else evaluates its operands and calls the reference's `equal_values` and
  `compare_values`.

Results are True, False or None exactly (`is` tests are safe). Property tests pin this module to
the reference on generated expressions and messages (tests/filter/test_properties.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, Final

from rocketlite.filter.errors import EvaluationError
from rocketlite.filter.java_values import (
    JavaInt,
    JavaLong,
    Value,
    is_number,
    negate,
    parse_boolean,
    parse_double,
    parse_int,
    parse_long,
)
from rocketlite.filter.nodes import (
    BooleanCast,
    BooleanConstant,
    Compare,
    Constant,
    Equal,
    Expr,
    In,
    IsNull,
    Logic,
    Negate,
    Not,
    Properties,
    Property,
    StringTest,
    chain_operands,
    compare_values,
    equal_values,
)

Fn = Callable[[Properties], Value]

_OPERATORS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_MIRRORED: Final = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_UNKNOWN: Final = object()  # `_static`: not the same for every message


def build(node: Expr) -> Fn:
    """A closure evaluating `node` for a message's properties, as `node.evaluate` does."""
    known = _static(node)
    if known is not _UNKNOWN:
        return _constant(known)  # type: ignore[arg-type]
    if isinstance(node, Property):
        return _property(node.name)
    if isinstance(node, Logic):
        return _logic(node)
    if isinstance(node, Not):
        if isinstance(node.operand, Not):  # the operand is boolean: NOT NOT x is x
            return build(node.operand.operand)
        return _not(build(node.operand))
    if isinstance(node, Equal):
        return _equal(node)
    if isinstance(node, Compare):
        return _compare(node)
    if isinstance(node, IsNull):
        return _is_null(node.operand)
    if isinstance(node, In):
        return _in(node)
    if isinstance(node, StringTest):
        return _string_test(node)
    if isinstance(node, BooleanCast):
        return _boolean_cast(build(node.operand))
    if isinstance(node, Negate):  # of a boolean expression: null, once it has been evaluated
        return _evaluated_then_null(build(node.operand))
    raise TypeError(f"no evaluator for {type(node).__name__}")


def _static(node: Expr) -> Value | object:
    """The value `node` has for every message (it cannot raise), or `_UNKNOWN`."""
    if isinstance(node, Constant | BooleanConstant):
        return node.value
    if isinstance(node, Negate):
        if isinstance(node.operand, Property):
            return None  # a property is a string or null: negated, null
        inner = _static(node.operand)
        if inner is _UNKNOWN:
            return _UNKNOWN
        return negate(inner) if is_number(inner) else None  # type: ignore[arg-type]
    return _UNKNOWN


def _constant(value: Value) -> Fn:
    def constant(props: Properties) -> Value:
        return value

    return constant


def _raising(message: str) -> Fn:
    def raising(props: Properties) -> Value:
        raise EvaluationError(message)

    return raising


def _fixed(node: Expr) -> Fn:
    """A node whose operands are both static: its value (or its error) is the same every time."""
    try:
        return _constant(node.evaluate({}))
    except EvaluationError as exc:
        return _raising(str(exc))


def _property(name: str) -> Fn:
    def prop(props: Properties) -> Value:
        return props.get(name)

    return prop


def _evaluated_then_null(inner: Fn) -> Fn:
    def negated(props: Properties) -> Value:
        inner(props)
        return None

    return negated


def _boolean_cast(inner: Fn) -> Fn:
    def cast(props: Properties) -> Value:
        v = inner(props)
        if v is None:
            return None
        return v if type(v) is bool else False

    return cast


def _not(inner: Fn) -> Fn:
    def not_(props: Properties) -> Value:
        v = inner(props)
        return None if v is None else not v

    return not_


def _logic(node: Logic) -> Fn:
    """Java's AND (OR): the first false (true) decides; else unknown if any operand was."""
    fns = tuple(build(x) for x in chain_operands(node))
    decisive = node.decides
    if len(fns) == 2:
        first, second = fns

        def pair(props: Properties) -> Value:
            lv = first(props)
            if lv is decisive:
                return decisive
            rv = second(props)
            if rv is decisive:
                return decisive
            return None if lv is None or rv is None else not decisive

        return pair

    def chain(props: Properties) -> Value:
        unknown = False
        for fn in fns:
            v = fn(props)
            if v is decisive:
                return decisive
            if v is None:
                unknown = True
        return None if unknown else not decisive

    return chain


def _is_null(operand: Expr) -> Fn:
    if isinstance(operand, Property):
        name = operand.name

        def prop_is_null(props: Properties) -> Value:
            return props.get(name) is None

        return prop_is_null
    inner = build(operand)

    def is_null(props: Properties) -> Value:
        return inner(props) is None

    return is_null


def _in(node: In) -> Fn:
    name, values, negated = node.operand.name, frozenset(node.values), node.negated

    def in_(props: Properties) -> Value:
        v = props.get(name)
        if v is None:
            return None
        return (v in values) != negated

    return in_


def _string_test(node: StringTest) -> Fn:
    test, search, negated = node.op, node.search, node.negated
    if not search:
        return _constant(False)
    inner = build(node.operand)

    def string_test(props: Properties) -> Value:
        v = inner(props)
        if type(v) is not str:
            return False
        if test == "CONTAINS":
            return (search in v) != negated
        if test == "STARTSWITH":
            return v.startswith(search) != negated
        return v.endswith(search) != negated

    return string_test


# --------------------------------------------------------------------------------------- = / <>


def _equal(node: Equal) -> Fn:
    left, right = node.left, node.right
    lk, rk = _static(left), _static(right)
    if lk is not _UNKNOWN and rk is not _UNKNOWN:
        return _fixed(node)
    if isinstance(left, Property):
        if rk is not _UNKNOWN:
            return _property_equals(left.name, rk)  # type: ignore[arg-type]
        if isinstance(right, Property):
            return _properties_equal(left.name, right.name)
    elif isinstance(right, Property) and lk is not _UNKNOWN:
        return _equals_property(lk, right.name)  # type: ignore[arg-type]
    lfn, rfn = build(left), build(right)

    def equal(props: Properties) -> Value:
        return equal_values(lfn(props), rfn(props))

    return equal


def _reader(value: Value) -> Callable[[str], Value] | None:
    """How `java_compare` reads a property string met by `value`'s class (None: no shortcut)."""
    if type(value) is JavaInt:
        return parse_int
    if type(value) is JavaLong:
        return parse_long
    if type(value) is float and math.isfinite(value) and value != 0.0:
        return parse_double  # literals are finite and non-zero: plain == and < are Double.compare's
    if type(value) is bool:
        return parse_boolean
    return None


def _property_equals(name: str, value: Value) -> Fn:
    """`prop = literal`: unknown when the property is absent (true if the literal is null too)."""
    if value is None:
        return lambda props: props.get(name) is None
    if type(value) is str:

        def equals_string(props: Properties) -> Value:
            v = props.get(name)
            return None if v is None else v == value

        return equals_string
    read = _reader(value)
    if read is None:
        return _generic_equal(_property(name), _constant(value))

    def equals_read(props: Properties) -> Value:
        v = props.get(name)
        return None if v is None else read(v) == value

    return equals_read


def _equals_property(value: Value, name: str) -> Fn:
    """`literal = prop`: false when the property is absent (unknown if the literal is null)."""
    if value is None:
        return lambda props: True if props.get(name) is None else None
    if type(value) is bool:  # Java casts the Boolean to a String: a ClassCastException

        def boolean_equals(props: Properties) -> Value:
            if props.get(name) is None:
                return False
            raise EvaluationError("ClassCastException: a Boolean cannot be compared with a String")

        return boolean_equals
    read = (lambda v: v) if type(value) is str else _reader(value)
    if read is None:
        return _generic_equal(_constant(value), _property(name))

    def equals_read(props: Properties) -> Value:
        v = props.get(name)
        return False if v is None else read(v) == value

    return equals_read


def _properties_equal(a: str, b: str) -> Fn:
    def equal(props: Properties) -> Value:
        lv, rv = props.get(a), props.get(b)
        if lv is None:
            return True if rv is None else None
        return False if rv is None else lv == rv

    return equal


def _generic_equal(lfn: Fn, rfn: Fn) -> Fn:
    return lambda props: equal_values(lfn(props), rfn(props))


# ---------------------------------------------------------------------------------- > >= < <=


def _compare(node: Compare) -> Fn:
    op, left, right = node.op, node.left, node.right
    lk, rk = _static(left), _static(right)
    if lk is not _UNKNOWN and rk is not _UNKNOWN:
        return _fixed(node)
    if lk is None:  # null at once; Java does not evaluate the right side
        return _constant(None)
    if rk is None:  # null, once the left side has been evaluated (a property cannot raise)
        return _constant(None) if isinstance(left, Property) else _generic_compare(node)
    if isinstance(left, Property):
        if isinstance(right, Property):
            return _properties_compare(op, left.name, right.name)
        read = _reader(rk) if is_number(rk) else None  # type: ignore[arg-type]
        if read is not None:
            return _property_compare(op, left.name, read, rk, literal_first=False)  # type: ignore[arg-type]
    elif isinstance(right, Property):
        read = _reader(lk) if is_number(lk) else None  # type: ignore[arg-type]
        if read is not None:
            return _property_compare(op, right.name, read, lk, literal_first=True)  # type: ignore[arg-type]
    return _generic_compare(node)


def _generic_compare(node: Compare) -> Fn:
    op, lfn, rfn = node.op, build(node.left), build(node.right)

    def compare(props: Properties) -> Value:
        lv = lfn(props)
        if lv is None:
            return None
        rv = rfn(props)
        if rv is None:
            return None
        return compare_values(op, lv, rv)

    return compare


def _property_compare(
    op: str, name: str, read: Callable[[str], Value], value: Value, *, literal_first: bool
) -> Fn:
    """`prop > number` or `number > prop`: the property read as the number's class; a NaN
    property is above every number (Double.compare)."""
    holds = _OPERATORS[op]
    if literal_first:
        holds = _OPERATORS[_MIRRORED[op]]  # 5 < prop is prop > 5
    if read is not parse_double:

        def property_vs_integer(props: Properties) -> Value:
            v = props.get(name)
            return None if v is None else holds(read(v), value)

        return property_vs_integer
    nan_holds = op in (">", ">=") if not literal_first else op in ("<", "<=")
    isnan = math.isnan

    def property_vs_double(props: Properties) -> Value:
        v = props.get(name)
        if v is None:
            return None
        d = parse_double(v)
        return nan_holds if isnan(d) else holds(d, value)

    return property_vs_double


def _properties_compare(op: str, a: str, b: str) -> Fn:
    """`prop > prop` (both are read as Doubles)."""

    def compare(props: Properties) -> Value:
        lv = props.get(a)
        if lv is None:
            return None
        rv = props.get(b)
        if rv is None:
            return None
        return compare_values(op, lv, rv)

    return compare
