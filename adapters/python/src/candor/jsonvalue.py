"""JSON values, read with the Rust reader's rules and written as compact JSON.

- :func:`loads_body` parses a response body and, when it fails, says whether the document
  ended early (a cut body) or is not JSON at all, in the words of :mod:`json`'s errors.
- :func:`dumps` writes compact JSON, a float as :func:`repr` writes it (as :func:`json.dumps`
  does).
- :func:`pointer` resolves RFC 6901 JSON pointers; :func:`json_equal` compares values with
  JSON's types (``1`` is not ``1.0``, ``true`` is not ``1``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, TypeAlias

from candor.jsonscan import MAX_DEPTH, OUT_OF_RANGE, first_error

__all__ = [
    "MISSING",
    "BodyParseError",
    "JsonLike",
    "JsonValue",
    "Missing",
    "dumps",
    "json_equal",
    "json_type",
    "loads_body",
    "loads_text",
    "pointer",
    "sorted_keys",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""Any JSON value, as :mod:`json` reads it."""

JsonLike: TypeAlias = (
    "bool | int | float | str | Sequence[JsonLike] | Mapping[str, JsonLike] | None"
)
"""Any JSON value as a caller may hold it: a sequence is an array, a mapping an object."""


class Missing(Enum):
    """The value of a JSON pointer that points at nothing."""

    MISSING = "MISSING"
    """What :func:`pointer` returns when the pointer resolves to nothing."""


MISSING: Final = Missing.MISSING
"""What :func:`pointer` returns when the pointer resolves to nothing."""

_I64_MIN: Final = -(2**63)
_U64_END: Final = 2**64


def json_type(value: JsonValue) -> str:
    """The JSON type's name, as the classifier's messages say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def json_equal(a: JsonValue, b: JsonValue) -> bool:
    """Equality of JSON values: types must agree (an integer never equals a float or a bool)."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(b, list):
        return False
    return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)


def _parse_index(token: str) -> int | None:
    if token.startswith("+") or (token.startswith("0") and len(token) > 1):
        return None
    if not token.isascii() or not token.isdigit():
        return None
    return int(token)


def pointer(value: JsonValue, path: str) -> JsonValue | Missing:
    """The value at the JSON pointer ``path`` (``""`` is the whole value), or :data:`MISSING`."""
    if path == "":
        return value
    if not path.startswith("/"):
        return MISSING
    target: JsonValue = value
    for raw in path[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict):
            if token not in target:
                return MISSING
            target = target[token]
        elif isinstance(target, list):
            index = _parse_index(token)
            if index is None or index >= len(target):
                return MISSING
            target = target[index]
        else:
            return MISSING
    return target


def sorted_keys(value: JsonLike) -> JsonValue:
    """A copy of ``value`` whose objects list their keys in order, as the Rust writer does."""
    if isinstance(value, Mapping):
        return {key: sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, str) or value is None or isinstance(value, bool | int | float):
        return value
    return [sorted_keys(item) for item in value]


def _format_float(number: float) -> str:
    """The float as :func:`json.dumps` writes it (its :func:`repr`), or ``null`` when not finite."""
    return repr(number) if math.isfinite(number) else "null"


def _dump(value: object, sort: bool, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(_format_float(value))
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _dump(item, sort, out)
        out.append("]")
    elif isinstance(value, Mapping):
        out.append("{")
        keys = sorted(value) if sort else list(value)
        for index, key in enumerate(keys):
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")
            if index:
                out.append(",")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _dump(value[key], sort, out)
        out.append("}")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def dumps(value: object, *, sort: bool = False) -> str:
    """Compact JSON: no white space, non-ASCII text as it is, a float as its :func:`repr`.

    A float that is not finite, which JSON cannot hold, is written ``null``.

    With ``sort``, object keys are written in order (as the Rust side writes a free-form JSON
    value); without it, in the dictionaries' own order.
    """
    out: list[str] = []
    _dump(value, sort, out)
    return "".join(out)


@dataclass(frozen=True)
class BodyParseError(Exception):
    """Why a body is not a JSON document."""

    message: str
    """What is wrong and where, e.g. ``Expecting ',' delimiter: line 1 column 5 (char 4)``."""
    eof: bool
    """Whether the document ended early: every byte so far could start a JSON document."""

    def __str__(self) -> str:
        return self.message


class _OutOfRangeError(Exception):
    pass


def _parse_int(text: str) -> int | float:
    if text == "-0":
        return -0.0
    number = int(text)
    if _I64_MIN <= number < _U64_END:
        return number
    return _parse_float(text)


def _parse_float(text: str) -> float:
    try:
        number = float(text)
    except OverflowError:  # pragma: no cover - float() of a text returns inf instead
        raise _OutOfRangeError from None
    if not math.isfinite(number):
        raise _OutOfRangeError
    return number


def _refuse_constant(text: str) -> JsonValue:
    raise ValueError(text)


def _check(value: JsonValue) -> None:
    """Refuses what :mod:`json` reads but the Rust reader does not.

    That is nesting deeper than 127 levels, and strings holding lone surrogates.
    """
    stack: list[tuple[JsonValue, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                item.encode("utf-8")
        elif isinstance(item, list | dict):
            if depth + 1 > MAX_DEPTH:
                raise RecursionError
            children = item.values() if isinstance(item, dict) else item
            if isinstance(item, dict):
                for key in item:
                    if not key.isascii():
                        key.encode("utf-8")
            stack.extend((child, depth + 1) for child in children)


def loads_text(
    text: str | bytes,
    *,
    object_pairs_hook: Callable[[list[tuple[str, JsonValue]]], JsonValue] | None = None,
) -> JsonValue:
    """Parses JSON text with the Rust reader's number rules (see :func:`loads_body`).

    Raises :class:`ValueError` when the text is not JSON.
    """
    try:
        value: JsonValue = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
            object_pairs_hook=object_pairs_hook,
        )
    except _OutOfRangeError:
        raise ValueError(OUT_OF_RANGE) from None
    return value


_BODY_DECODER: Final = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_refuse_constant
)
"""The decoder of :func:`loads_body`, made once: :func:`json.loads` with options makes one per
call, which costs more than decoding a small body. Threads share it as they share the default
decoder of :func:`json.loads`: its only scratch state is a cache of object keys, cleared after
each document, which at worst loses a key's interning when two decodings interleave."""


def _may_break_rust_rules(data: bytes) -> bool:
    r"""Whether a body :mod:`json` read could hold what :func:`_check` refuses.

    A string holding a lone surrogate needs a ``\u`` escape (the body was decoded as strict
    UTF-8, which refuses encoded surrogates), and nesting deeper than :data:`MAX_DEPTH` needs
    more than that many ``[`` and ``{``. A body with neither need not be walked.
    """
    return b"\\u" in data or data.count(b"[") + data.count(b"{") > MAX_DEPTH


def loads_body(data: bytes) -> JsonValue:
    """Parses a whole response body as one JSON document.

    Numbers are read as the Rust reader reads them: an integer outside the 64-bit range
    becomes a float, ``-0`` is ``-0.0``, and a number too large for a float is refused.
    Raises :class:`BodyParseError`.
    """
    try:
        text = data.decode("utf-8")
        if text.startswith("\ufeff"):
            # What json.loads refuses before decoding: a byte order mark is not JSON.
            raise ValueError("Unexpected UTF-8 BOM")
        value: JsonValue = _BODY_DECODER.decode(text)
        if _may_break_rust_rules(data):
            _check(value)
    except _OutOfRangeError:
        raise BodyParseError(OUT_OF_RANGE, eof=False) from None
    except (ValueError, RecursionError):
        message, eof = first_error(data)
        raise BodyParseError(message, eof=eof) from None
    return value
