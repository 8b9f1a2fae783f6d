"""RocketMQ's SQL92 grammar (`SelectorParser.jj`), parsed by recursive descent into `nodes`.

Lowest precedence first (each level a left-associative loop over the next one):

    selector    := or                                   (must give a boolean; see below)
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' string (',' string)* ')' )*
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | property | '(' or ')'
    literal     := string | decimal | floating | TRUE | FALSE | NULL

So NOT binds tighter than any comparison: `NOT a = 'x'` is `(NOT a) = 'x'`; write `NOT (a = 'x')`
or `a <> 'x'`. Parsing stops at the first token that cannot continue the expression, and the rest
of the text is not read: `a = 1 b = 2` is `a = 1`, as in RocketMQ (there is no end-of-input rule).

RocketMQ also refuses, while building the tree (its `create*` factories; `FilterSyntaxError` here):
- an operand of AND, OR, NOT, or the whole expression, that is not boolean: a literal other than
  TRUE/FALSE/NULL, or a negation (a property is allowed: it is cast, and never true);
- NULL as an operand of `=`/`<>` (use IS NULL), and `TRUE = <string or number literal>`;
- an operand of `>`, `>=`, `<`, `<=`, BETWEEN that is a non-numeric literal or a boolean expression;
- BETWEEN with literal bounds where the lower is greater than the upper, or either is NULL;
- IN on anything but a property;
- a decimal literal outside Long's range, a floating literal that overflows or is zero (Java checks
  `value < Double.MIN_VALUE`, so `0.0` is refused; `0` is fine).
A comparison between a property and a literal is not checked for types: a property that does not
spell the number raises at evaluation (`EvaluationError`: the message does not match).
"""

from __future__ import annotations

import math
from typing import Final

from rocketlite.filter.errors import EvaluationError, FilterSyntaxError
from rocketlite.filter.java_values import INT_MAX, LONG_MAX, JavaInt, JavaLong, is_number, java_compare
from rocketlite.filter.lexer import DECIMAL, EOF, ERROR, FLOAT, ID, STRING, Token, tokenize
from rocketlite.filter.nodes import (
    STRING_TESTS,
    And,
    BooleanCast,
    BooleanConstant,
    Compare,
    Constant,
    Equal,
    Expr,
    In,
    IsNull,
    Negate,
    Not,
    Or,
    Property,
    StringTest,
)

# Parentheses and unary operators nested deeper than this are refused: each level costs the
# parser a few Python frames, and a filter needs nowhere near this many. (RocketMQ's limit is the
# JVM stack's.)
MAX_NESTING: Final = 100

_COMPARISONS: Final = frozenset({">", ">=", "<", "<="})
_LITERALS: Final = frozenset({STRING, DECIMAL, FLOAT, "TRUE", "FALSE", "NULL"})
_AFTER_NOT: Final = "CONTAINS, STARTSWITH, ENDSWITH, BETWEEN or IN after NOT"


def parse(text: str) -> Expr:
    """The boolean expression tree of `text`, or `FilterSyntaxError` naming the error and where."""
    return _Parser(text).selector()


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.pos = 0
        self.depth = 0

    # -- tokens ----------------------------------------------------------------------------
    def error(self, reason: str, offset: int) -> FilterSyntaxError:
        return FilterSyntaxError(reason, self.text, offset)

    def peek(self, ahead: int = 0) -> Token:
        """The token `ahead` places on; a lexical error is raised when the parser reaches it."""
        tok = self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]
        if tok.kind == ERROR:
            raise self.error(f"lexical error: {tok.value}", tok.offset)
        return tok

    def take(self) -> Token:
        tok = self.peek()
        self.pos += 1
        return tok

    def unexpected(self, tok: Token, expected: str) -> FilterSyntaxError:
        found = "end of expression" if tok.kind == EOF else repr(tok.text)
        return self.error(f"unexpected {found}, expected {expected}", tok.offset)

    def expect(self, kind: str, expected: str) -> Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.unexpected(tok, expected)
        self.pos += 1
        return tok

    def nest(self, tok: Token) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"more than {MAX_NESTING} nested parentheses and unary operators", tok.offset)

    # -- grammar ---------------------------------------------------------------------------
    def selector(self) -> Expr:
        start = self.peek().offset
        return self.as_boolean(self.or_expr(), start)

    def or_expr(self) -> Expr:
        start = self.peek().offset
        left = self.and_expr()
        while self.peek().kind == "OR":
            self.take()
            right_start = self.peek().offset
            right = self.and_expr()
            left = Or(self.as_boolean(left, start), self.as_boolean(right, right_start))
        return left

    def and_expr(self) -> Expr:
        start = self.peek().offset
        left = self.equality_expr()
        while self.peek().kind == "AND":
            self.take()
            right_start = self.peek().offset
            right = self.equality_expr()
            left = And(self.as_boolean(left, start), self.as_boolean(right, right_start))
        return left

    def equality_expr(self) -> Expr:
        left = self.comparison_expr()
        while True:
            tok = self.peek()
            if tok.kind == "=":
                self.take()
                left = self.create_equal(left, self.comparison_expr(), tok)
            elif tok.kind == "<>":
                self.take()
                left = Not(self.create_equal(left, self.comparison_expr(), tok))
            elif tok.kind == "IS":
                self.take()
                if self.peek().kind == "NULL":
                    self.take()
                    left = IsNull(left)
                else:
                    self.expect("NOT", "NULL or NOT NULL after IS")
                    self.expect("NULL", "NULL after IS NOT")
                    left = Not(IsNull(left))
            else:
                return left

    def comparison_expr(self) -> Expr:
        left = self.unary_expr()
        while True:
            tok = self.peek()
            kind, negated = tok.kind, False
            if kind == "NOT":
                kind, negated = self.peek(1).kind, True
                if kind not in STRING_TESTS and kind not in ("BETWEEN", "IN"):
                    raise self.unexpected(self.peek(1), _AFTER_NOT)
                self.take()
            if kind in _COMPARISONS:
                self.take()
                left = self.create_compare(kind, left, self.unary_expr(), tok)
            elif kind in STRING_TESTS:
                self.take()
                left = StringTest(kind, left, self.string_literal(), negated)
            elif kind == "BETWEEN":
                self.take()
                low = self.unary_expr()
                self.expect("AND", "AND between the bounds of BETWEEN")
                high = self.unary_expr()
                if negated:
                    below = self.create_compare("<", left, low, tok)
                    left = Or(below, self.create_compare(">", left, high, tok))
                else:
                    left = self.create_between(left, low, high, tok)
            elif kind == "IN":
                self.take()
                left = self.create_in(left, self.in_list(), negated, tok)
            else:
                return left

    def unary_expr(self) -> Expr:
        tok = self.peek()
        if tok.kind not in ("+", "-", "NOT"):
            return self.primary_expr()
        self.take()
        self.nest(tok)
        operand_start = self.peek().offset
        operand = self.unary_expr()
        self.depth -= 1
        if tok.kind == "+":
            return operand
        if tok.kind == "-":
            return Negate(operand)
        return Not(self.as_boolean(operand, operand_start))

    def primary_expr(self) -> Expr:
        tok = self.peek()
        if tok.kind in _LITERALS:
            return self.literal()
        if tok.kind == ID:
            self.take()
            return Property(tok.text)
        if tok.kind == "(":
            self.take()
            self.nest(tok)
            inner = self.or_expr()
            self.expect(")", "')'")
            self.depth -= 1
            return inner
        raise self.unexpected(tok, "a literal, a property name, '(', '+', '-' or NOT")

    def literal(self) -> Expr:
        tok = self.take()
        if tok.kind == STRING:
            return Constant(tok.value)
        if tok.kind == DECIMAL:
            return self.decimal(tok)
        if tok.kind == FLOAT:
            return self.floating(tok)
        return BooleanConstant(None if tok.kind == "NULL" else tok.kind == "TRUE")

    def string_literal(self) -> str:
        return self.expect(STRING, "a string literal").value

    def in_list(self) -> tuple[str, ...]:
        self.expect("(", "'(' after IN")
        values = [self.string_literal()]
        while self.peek().kind == ",":
            self.take()
            values.append(self.string_literal())
        self.expect(")", "',' or ')' in the IN list")
        return tuple(values)

    # -- RocketMQ's checks while building (ComparisonExpression.create*, ConstantExpression) --
    def decimal(self, tok: Token) -> Constant:
        """`createFromDecimal`: an Integer when it fits, else a Long, else refused."""
        digits = tok.text.rstrip("lL")
        if len(digits) > len(str(LONG_MAX)) or int(digits) > LONG_MAX:
            raise self.error(f"{tok.text} is out of the range of a Long", tok.offset)
        value = int(digits)
        return Constant(JavaInt(value) if value <= INT_MAX else JavaLong(value))

    def floating(self, tok: Token) -> Constant:
        """`createFloat`: refused above Double.MAX_VALUE and below Double.MIN_VALUE (so 0.0 too)."""
        value = float(tok.text)
        if value == math.inf:
            raise self.error(f"{tok.text} is greater than the largest Double", tok.offset)
        if value == 0.0:
            raise self.error(f"{tok.text} is less than the smallest positive Double", tok.offset)
        return Constant(value)

    def as_boolean(self, node: Expr, offset: int) -> Expr:
        """`asBooleanExpression`: a boolean expression as is, a property cast, anything else refused."""
        if node.is_boolean:
            return node
        if isinstance(node, Property):
            return BooleanCast(node)
        raise self.error(f"{node} does not give a boolean value", offset)

    def create_equal(self, left: Expr, right: Expr, tok: Token) -> Expr:
        for side in (left, right):
            if isinstance(side, BooleanConstant) and side.value is None:
                raise self.error(f"NULL cannot be compared by {tok.text}; use IS [NOT] NULL", tok.offset)
        if left.is_constant and right.is_constant and left.is_boolean and not right.is_boolean:
            raise self.error(f"{left} cannot be compared with {right}", tok.offset)
        return Equal(left, right)

    def create_compare(self, op: str, left: Expr, right: Expr, tok: Token) -> Expr:
        for side in (left, right):
            if isinstance(side, Constant | BooleanConstant) and not is_number(side.value):
                raise self.error(f"{side} cannot be compared by {op}: only numbers can", tok.offset)
            if side.is_boolean:
                raise self.error(f"the boolean {side} cannot be compared by {op}", tok.offset)
        return Compare(op, left, right)

    def create_between(self, value: Expr, low: Expr, high: Expr, tok: Token) -> Expr:
        if isinstance(low, Constant | BooleanConstant) and isinstance(high, Constant | BooleanConstant):
            if low.value is None or high.value is None:
                raise self.error("the bounds of BETWEEN cannot be NULL", tok.offset)
            try:
                inverted = java_compare(high.value, low.value) < 0
            except EvaluationError as exc:
                raise self.error(f"the bounds of BETWEEN cannot be compared: {exc}", tok.offset) from None
            if inverted:
                raise self.error(f"BETWEEN {low} AND {high}: the lower bound is above the upper", tok.offset)
        return And(self.create_compare(">=", value, low, tok), self.create_compare("<=", value, high, tok))

    def create_in(self, left: Expr, values: tuple[str, ...], negated: bool, tok: Token) -> Expr:
        if not isinstance(left, Property):
            op = "NOT IN" if negated else "IN"
            raise self.error(f"{op} needs a property on its left, not {left}", tok.offset)
        return In(left, values, negated)
