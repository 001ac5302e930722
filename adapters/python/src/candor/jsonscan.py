"""Finding the first error in a JSON text, as the Rust reader reports it.

Only run on a body that :mod:`json` refused: it says where the first error is, in the Rust
reader's words (``EOF while parsing a list at line 1 column 14``), and whether the text merely
ended early.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_DEPTH", "first_error"]

MAX_DEPTH: Final = 127
"""The deepest nesting the Rust reader accepts (it refuses the 128th level)."""

_WS: Final = b" \t\n\r"
_HEX: Final = frozenset(b"0123456789abcdefABCDEF")
_STRING_RUN: Final = re.compile(rb'[^"\\\x00-\x1f]*')


class _Stop(Exception):  # noqa: N818 - a jump out of the scanner, not an error
    def __init__(self, code: str, index: int, eof: bool) -> None:
        super().__init__(code)
        self.code = code
        self.index = index
        self.eof = eof


class _Scanner:
    """A JSON reader that only looks for the first error, with the Rust reader's codes."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.index = 0
        self.depth = 0

    def peek(self) -> int | None:
        return self.data[self.index] if self.index < len(self.data) else None

    def whitespace(self) -> int | None:
        while self.index < len(self.data) and self.data[self.index] in _WS:
            self.index += 1
        return self.peek()

    def peek_error(self, code: str, eof: bool = False) -> _Stop:
        return _Stop(code, min(len(self.data), self.index + 1), eof)

    def error(self, code: str, eof: bool = False) -> _Stop:
        return _Stop(code, self.index, eof)

    def eof_value(self) -> _Stop:
        return self.peek_error("EOF while parsing a value", eof=True)

    def value(self) -> None:
        byte = self.whitespace()
        if byte is None:
            raise self.eof_value()
        if byte == ord("n"):
            self.index += 1
            self.ident(b"ull")
        elif byte == ord("t"):
            self.index += 1
            self.ident(b"rue")
        elif byte == ord("f"):
            self.index += 1
            self.ident(b"alse")
        elif byte == ord("-"):
            self.index += 1
            self.number()
        elif 0x30 <= byte <= 0x39:
            self.number()
        elif byte == ord('"'):
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
            raise self.peek_error("expected value")

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.peek_error("recursion limit exceeded")

    def ident(self, rest: bytes) -> None:
        for expected in rest:
            byte = self.peek()
            if byte is None:
                raise self.error("EOF while parsing a value", eof=True)
            self.index += 1
            if byte != expected:
                raise self.error("expected ident")

    def digits(self) -> int:
        start = self.index
        while self.index < len(self.data) and 0x30 <= self.data[self.index] <= 0x39:
            self.index += 1
        return self.index - start

    def number(self) -> None:
        byte = self.peek()
        if byte is not None:
            self.index += 1
        if byte == ord("0"):
            following = self.peek()
            if following is not None and 0x30 <= following <= 0x39:
                raise self.peek_error("invalid number")
        elif byte is not None and 0x31 <= byte <= 0x39:
            self.digits()
        else:
            raise self.error("invalid number")
        if self.peek() == ord("."):
            self.index += 1
            if self.digits() == 0:
                if self.peek() is None:
                    raise self.eof_value()
                raise self.peek_error("invalid number")
        if self.peek() in (ord("e"), ord("E")):
            self.index += 1
            if self.peek() in (ord("+"), ord("-")):
                self.index += 1
            byte = self.peek()
            if byte is None:
                raise self.error("EOF while parsing a value", eof=True)
            self.index += 1
            if not 0x30 <= byte <= 0x39:
                raise self.error("invalid number")
            self.digits()

    def hex_escape(self) -> int:
        if self.index + 4 > len(self.data):
            self.index = len(self.data)
            raise self.error("EOF while parsing a string", eof=True)
        quad = self.data[self.index : self.index + 4]
        self.index += 4
        if not all(byte in _HEX for byte in quad):
            raise self.error("invalid escape")
        return int(quad, 16)

    def escape(self) -> None:
        byte = self.peek()
        if byte is None:
            raise self.error("EOF while parsing a string", eof=True)
        self.index += 1
        if byte in b'"\\/bfnrt':
            return
        if byte != ord("u"):
            raise self.error("invalid escape")
        unit = self.hex_escape()
        if 0xDC00 <= unit <= 0xDFFF:
            raise self.error("lone leading surrogate in hex escape")
        if not 0xD800 <= unit <= 0xDBFF:
            return
        for expected in (ord("\\"), ord("u")):
            byte = self.peek()
            if byte is None:
                raise self.error("EOF while parsing a string", eof=True)
            self.index += 1
            if byte != expected:
                raise self.error("unexpected end of hex escape")
        if not 0xDC00 <= self.hex_escape() <= 0xDFFF:
            raise self.error("lone leading surrogate in hex escape")

    def string(self) -> None:
        start = self.index
        while True:
            run = _STRING_RUN.match(self.data, self.index)
            self.index = run.end() if run else self.index
            byte = self.peek()
            if byte is None:
                raise self.error("EOF while parsing a string", eof=True)
            self.index += 1
            if byte == ord('"'):
                try:
                    self.data[start : self.index - 1].decode("utf-8")
                except UnicodeDecodeError:
                    raise self.error("invalid unicode code point") from None
                return
            if byte == ord("\\"):
                self.escape()
            else:
                raise self.error("control character (\\u0000-\\u001F) found while parsing a string")

    def list(self) -> None:
        first = True
        while True:
            byte = self.whitespace()
            if byte == ord("]"):
                self.index += 1
                return
            if byte == ord(",") and not first:
                self.index += 1
                byte = self.whitespace()
            elif byte is None:
                raise self.peek_error("EOF while parsing a list", eof=True)
            elif first:
                first = False
            else:
                raise self.peek_error("expected `,` or `]`")
            if byte == ord("]"):
                raise self.peek_error("trailing comma")
            if byte is None:
                raise self.eof_value()
            self.value()

    def object(self) -> None:
        first = True
        while True:
            byte = self.whitespace()
            if byte == ord("}"):
                self.index += 1
                return
            if byte == ord(",") and not first:
                self.index += 1
                byte = self.whitespace()
            elif byte is None:
                raise self.peek_error("EOF while parsing an object", eof=True)
            elif first:
                first = False
            else:
                raise self.peek_error("expected `,` or `}`")
            if byte == ord("}"):
                raise self.peek_error("trailing comma")
            if byte is None:
                raise self.eof_value()
            if byte != ord('"'):
                raise self.peek_error("key must be a string")
            self.index += 1
            self.string()
            colon = self.whitespace()
            if colon is None:
                raise self.peek_error("EOF while parsing an object", eof=True)
            if colon != ord(":"):
                raise self.peek_error("expected `:`")
            self.index += 1
            self.value()

    def document(self) -> None:
        self.value()
        if self.whitespace() is not None:
            raise self.peek_error("trailing characters")


def first_error(data: bytes) -> tuple[str, bool]:
    """The first error in ``data`` and whether it is the text ending early.

    A text with no error here is one the fast reader refused for a number it could not hold.
    """
    scanner = _Scanner(data)
    try:
        scanner.document()
    except _Stop as stop:
        line_start = data.rfind(b"\n", 0, stop.index) + 1
        line = data.count(b"\n", 0, line_start) + 1
        column = stop.index - line_start
        return f"{stop.code} at line {line} column {column}", stop.eof
    return "number out of range", False
