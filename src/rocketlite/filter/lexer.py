"""The tokens of RocketMQ's SQL92 filter language (the TOKEN section of `SelectorParser.jj`).

At each position the longest token wins, a keyword over an identifier of the same length:

- blanks: space, tab, CR, LF, form feed; comments `-- ...` (only when a line break ends it: at
  the very end of the text `--` is two minus signs) and `/* ... */`;
- keywords, in any case: NOT AND OR BETWEEN IN TRUE FALSE NULL IS CONTAINS STARTSWITH ENDSWITH;
- identifiers (property names, case-sensitive): `[A-Za-z_$][A-Za-z0-9_$]*`, ASCII only;
- decimal literals `0` or `[1-9][0-9]*` with an optional `L`/`l` (no octal, no hex: `007` is
  the three literals 0, 0 and 7); floating literals `1.5`, `1.`, `.5`, `1e10`, `1.5E-3`;
- string literals in single quotes, `''` standing for one quote; any character inside;
- operators `=  <>  >  >=  <  <=  (  )  ,  +  -`.

Anything else is a lexical error. RocketMQ's parser reads tokens one at a time and stops at the
first token that cannot continue the expression; what follows that token is never read, so a
lexical error there goes unnoticed. `tokenize` therefore ends with an ERROR token at the first
lexical error instead of raising, and the parser raises it only if it reads that far.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

KEYWORDS: Final = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)

# Token kinds besides the keywords (kind = the keyword in upper case) and the operators (kind =
# the operator itself).
ID: Final = "ID"
DECIMAL: Final = "DECIMAL"
FLOAT: Final = "FLOAT"
STRING: Final = "STRING"
EOF: Final = "EOF"
ERROR: Final = "ERROR"

_BLANKS: Final = " \t\n\r\f"
_LINE_COMMENT: Final = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT: Final = re.compile(r"/\*[^*]*\*+(?:[^/*][^*]*\*+)*/")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL: Final = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT: Final = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
)
_OPERATORS_2: Final = frozenset({"<>", ">=", "<="})
_OPERATORS_1: Final = frozenset("=<>(),+-")
_IDENTIFIER_START: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$")


class Token(NamedTuple):
    """One token: its kind, its text as written, and where it starts (offset in the expression).
    A STRING's `value` is its decoded text; an ERROR's `value` says what is wrong."""

    kind: str
    text: str
    offset: int
    value: str = ""


def _string_end(text: str, start: int) -> int:
    """End of the longest string literal starting at `start` (a quote), or -1 if none closes."""
    end, i = -1, start + 1
    while True:
        q = text.find("'", i)
        if q < 0:
            return end
        end = q + 1
        if text.startswith("'", q + 1):  # '' : a quote inside, or this one closes and one opens
            i = q + 2
            continue
        return end


def tokenize(text: str) -> list[Token]:
    """Every token of `text`, ending with EOF, or with ERROR at the first lexical error."""
    tokens: list[Token] = []
    n, i = len(text), 0
    while True:
        while i < n:  # blanks and comments
            if text[i] in _BLANKS:
                i += 1
                continue
            m = (_LINE_COMMENT if text.startswith("--", i) else _BLOCK_COMMENT).match(text, i)
            if m is None:
                break
            i = m.end()
        if i >= n:
            tokens.append(Token(EOF, "", n))
            return tokens
        c = text[i]
        if c in _IDENTIFIER_START:
            word = _IDENTIFIER.match(text, i).group()  # type: ignore[union-attr]
            upper = word.upper()
            tokens.append(Token(upper if upper in KEYWORDS else ID, word, i))
            i += len(word)
        elif c.isascii() and (c.isdigit() or c == "."):
            d, f = _DECIMAL.match(text, i), _FLOAT.match(text, i)
            d_len, f_len = (d.end() - i if d else 0), (f.end() - i if f else 0)
            if not d_len and not f_len:
                tokens.append(Token(ERROR, c, i, "a '.' must be followed by a digit"))
                return tokens
            kind, length = (FLOAT, f_len) if f_len > d_len else (DECIMAL, d_len)
            tokens.append(Token(kind, text[i : i + length], i))
            i += length
        elif c == "'":
            end = _string_end(text, i)
            if end < 0:
                tokens.append(Token(ERROR, c, i, "string literal is not closed"))
                return tokens
            tokens.append(Token(STRING, text[i:end], i, text[i + 1 : end - 1].replace("''", "'")))
            i = end
        elif text[i : i + 2] in _OPERATORS_2:
            tokens.append(Token(text[i : i + 2], text[i : i + 2], i))
            i += 2
        elif c in _OPERATORS_1:
            tokens.append(Token(c, c, i))
            i += 1
        else:
            why = "comment is not closed" if text.startswith("/*", i) else f"unexpected character {c!r}"
            tokens.append(Token(ERROR, c, i, why))
            return tokens
