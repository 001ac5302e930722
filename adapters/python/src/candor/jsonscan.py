"""Finding the first error in a JSON text, with the Rust reader's rules, in :mod:`json`'s words.

Only run on a body that :mod:`json` refused: it says where the first error is, written as a
:class:`json.JSONDecodeError` is (``Expecting ',' delimiter: line 1 column 5 (char 4)``), and
whether the text merely ended early.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Final

__all__ = ["MAX_DEPTH", "OUT_OF_RANGE", "first_error"]

MAX_DEPTH: Final = 127
"""The deepest nesting the Rust reader accepts (it refuses the 128th level)."""

OUT_OF_RANGE: Final = "Number too large for a float"
"""The error of a text whose only fault is a number too large for a float."""

_WS: Final = b" \t\n\r"
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_STRING_RUN: Final = re.compile(rb'[^"\\\x00-\x1f]*')
_UNPAIRED: Final = "Unpaired surrogate in \\uXXXX escape"
_PROPERTY_NAME: Final = "Expecting property name enclosed in double quotes"


class _Stop(Exception):  # noqa: N818 - a jump out of the scanner, not an error
    def __init__(self, message: str, index: int, eof: bool) -> None:
        super().__init__(message)
        self.message = message
        self.index = index
        self.eof = eof


class _Scanner:
    """A JSON reader that only looks for the first error, as the Rust reader finds it.

    An error is placed as :mod:`json` places its own: at the byte that is wrong, at the start of
    the value it spoils (a literal, a number, a string left open), or at the end of the text when
    the text ends early.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.index = 0
        self.depth = 0
        self.string_start = 0

    def peek(self) -> int | None:
        return self.data[self.index] if self.index < len(self.data) else None

    def whitespace(self) -> int | None:
        while self.index < len(self.data) and self.data[self.index] in _WS:
            self.index += 1
        return self.peek()

    def stop(self, message: str, index: int | None = None, eof: bool = False) -> _Stop:
        return _Stop(message, self.index if index is None else index, eof)

    def unterminated_string(self) -> _Stop:
        return self.stop("Unterminated string starting at", self.string_start, eof=True)

    def value(self) -> None:
        byte = self.whitespace()
        if byte is None:
            raise self.stop("Expecting value", eof=True)
        if byte == ord("n"):
            self.literal(b"null")
        elif byte == ord("t"):
            self.literal(b"true")
        elif byte == ord("f"):
            self.literal(b"false")
        elif byte == ord("-") or 0x30 <= byte <= 0x39:
            self.number()
        elif byte == ord('"'):
            self.string_start = self.index
            self.index += 1
            self.string()
        elif byte == ord("["):
            self.nest()
            self.index += 1
            self.list()
            self.depth -= 1
        elif byte == ord("{"):
            self.nest()
            self.index += 1
            self.object()
            self.depth -= 1
        else:
            raise self.stop("Expecting value")

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.stop(f"Nesting deeper than {MAX_DEPTH} levels")

    def literal(self, word: bytes) -> None:
        start = self.index
        for expected in word:
            byte = self.peek()
            if byte is None:
                raise self.stop("Expecting value", start, eof=True)
            self.index += 1
            if byte != expected:
                raise self.stop("Expecting value", start)

    def digits(self) -> int:
        start = self.index
        while self.index < len(self.data) and 0x30 <= self.data[self.index] <= 0x39:
            self.index += 1
        return self.index - start

    def number(self) -> None:
        start = self.index
        if self.peek() == ord("-"):
            self.index += 1
        byte = self.peek()
        if byte is None or not 0x30 <= byte <= 0x39:
            raise self.stop("Expecting value", start)
        self.index += 1
        if byte == ord("0"):
            following = self.peek()
            if following is not None and 0x30 <= following <= 0x39:
                raise self.stop("Invalid number", start)
        else:
            self.digits()
        if self.peek() == ord("."):
            self.index += 1
            if self.digits() == 0:
                if self.peek() is None:
                    raise self.stop("Unterminated number starting at", start, eof=True)
                raise self.stop("Invalid number", start)
        if self.peek() in (ord("e"), ord("E")):
            self.index += 1
            if self.peek() in (ord("+"), ord("-")):
                self.index += 1
            byte = self.peek()
            if byte is None:
                raise self.stop("Unterminated number starting at", start, eof=True)
            self.index += 1
            if not 0x30 <= byte <= 0x39:
                raise self.stop("Invalid number", start)
            self.digits()

    def hex_escape(self) -> int:
        r"""The code unit of the ``\uXXXX`` escape whose ``u`` was just read."""
        u_at = self.index - 1
        if self.index + 4 > len(self.data):
            raise self.unterminated_string()
        quad = self.data[self.index : self.index + 4]
        self.index += 4
        if not all(byte in _HEX for byte in quad):
            raise self.stop("Invalid \\uXXXX escape", u_at)
        return int(quad, 16)

    def escape(self) -> None:
        backslash = self.index - 1
        byte = self.peek()
        if byte is None:
            raise self.unterminated_string()
        self.index += 1
        if byte in b'"\\/bfnrt':
            return
        if byte != ord("u"):
            raise self.stop("Invalid \\escape", backslash)
        unit = self.hex_escape()
        if 0xDC00 <= unit <= 0xDFFF:
            raise self.stop(_UNPAIRED, backslash)
        if not 0xD800 <= unit <= 0xDBFF:
            return
        for expected in (ord("\\"), ord("u")):
            byte = self.peek()
            if byte is None:
                raise self.unterminated_string()
            self.index += 1
            if byte != expected:
                raise self.stop(_UNPAIRED, backslash)
        if not 0xDC00 <= self.hex_escape() <= 0xDFFF:
            raise self.stop(_UNPAIRED, backslash)

    def string(self) -> None:
        start = self.index
        while True:
            run = _STRING_RUN.match(self.data, self.index)
            self.index = run.end() if run else self.index
            byte = self.peek()
            if byte is None:
                raise self.unterminated_string()
            self.index += 1
            if byte == ord('"'):
                try:
                    self.data[start : self.index - 1].decode("utf-8")
                except UnicodeDecodeError as err:
                    raise self.stop("Invalid UTF-8 in string", start + err.start) from None
                return
            if byte == ord("\\"):
                self.escape()
            else:
                raise self.stop("Invalid control character at", self.index - 1)

    def items(self, close: int, container: str, expecting: str) -> Iterator[int]:
        """The byte that starts each item of an array or object, up to its ``close`` byte.

        The commas between items are read here; ``expecting`` is the error where an item is
        missing, and ``container`` (``array`` or ``object``) is named in a trailing comma's.
        """
        first = True
        comma = self.index
        while True:
            byte = self.whitespace()
            if byte == close:
                self.index += 1
                return
            if byte == ord(",") and not first:
                comma = self.index
                self.index += 1
                byte = self.whitespace()
            elif byte is None:
                raise self.stop(expecting if first else "Expecting ',' delimiter", eof=True)
            elif first:
                first = False
            else:
                raise self.stop("Expecting ',' delimiter")
            if byte == close:
                raise self.stop(f"Illegal trailing comma before end of {container}", comma)
            if byte is None:
                raise self.stop(expecting, eof=True)
            yield byte

    def list(self) -> None:
        for _ in self.items(ord("]"), "array", "Expecting value"):
            self.value()

    def object(self) -> None:
        for byte in self.items(ord("}"), "object", _PROPERTY_NAME):
            if byte != ord('"'):
                raise self.stop(_PROPERTY_NAME)
            self.string_start = self.index
            self.index += 1
            self.string()
            colon = self.whitespace()
            if colon is None:
                raise self.stop("Expecting ':' delimiter", eof=True)
            if colon != ord(":"):
                raise self.stop("Expecting ':' delimiter")
            self.index += 1
            self.value()

    def document(self) -> None:
        self.value()
        if self.whitespace() is not None:
            raise self.stop("Extra data")


def first_error(data: bytes) -> tuple[str, bool]:
    """The first error in ``data`` and whether it is the text ending early.

    The error is written as :mod:`json` writes its own, with the line, column and character
    counted in the text decoded as UTF-8 (an invalid sequence counting as one character). A text
    with no error here is one the fast reader refused for a number it could not hold.
    """
    scanner = _Scanner(data)
    try:
        scanner.document()
    except _Stop as stop:
        text = data.decode("utf-8", "replace")
        at = len(data[: stop.index].decode("utf-8", "replace"))
        return str(json.JSONDecodeError(stop.message, text, at)), stop.eof
    return OUT_OF_RANGE, False
