"""`MessageSelector`: what a consumer subscribes to, a TAG expression or an SQL92 one.

The Java client's `MessageSelector.byTag("TagA || TagB")` / `MessageSelector.bySql("a > 5")`.
Consumers take a selector wherever they take a tag expression (a plain string is a tag
expression). An SQL92 expression is compiled here before anything is sent (`rocketlite.filter`,
the broker's grammar), so a malformed one raises `SubscriptionParseError` (code 23) naming the
error and where it is; the broker filters the messages by their properties, which it does only
with `enablePropertyFilter=true` (the push consumer asks it at start, CHECK_CLIENT_CONFIG, as the
Java client does, and fails to start otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketlite.client.errors import SubscriptionParseError
from rocketlite.filter import SQL92, FilterSyntaxError
from rocketlite.filter import compile as compile_sql92
from rocketlite.protocol.subscription import SUB_ALL, TAG_EXPRESSION

__all__ = ["MessageSelector"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """An expression and its type (`TAG` or `SQL92`); build one with `by_tag` or `by_sql`."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = SUB_ALL) -> MessageSelector:
        """A TAG expression: `"*"` or `"TagA || TagB"`."""
        return cls(TAG_EXPRESSION, expression or SUB_ALL)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """An SQL92 expression over the messages' properties (TAGS among them), e.g.
        `"TAGS IN ('TagA', 'TagB') AND price > 100"`; `SubscriptionParseError` if malformed."""
        try:
            compile_sql92(expression)
        except FilterSyntaxError as exc:
            raise SubscriptionParseError(str(exc)) from None
        return cls(SQL92, expression)

    @property
    def is_tag(self) -> bool:
        return self.expression_type == TAG_EXPRESSION


def as_selector(expression: str | MessageSelector | None) -> MessageSelector:
    """A selector for what consumers take: a selector, or a tag expression (None: `*`)."""
    if isinstance(expression, MessageSelector):
        return expression
    return MessageSelector.by_tag(expression or SUB_ALL)
