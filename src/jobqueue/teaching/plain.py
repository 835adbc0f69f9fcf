"""Plain data: the only form in which a checked value leaves a learner's kernel.

A check's value crosses from the kernel that ran the learner's code to the checker as
plain data, and the checker compares it with the expected value in its own process
(:mod:`jobqueue.teaching.capture`). Plain data is ``None``, ``bool``, ``int``, ``float``,
``str`` and lists (or tuples) and dicts of them; :func:`encode` writes it as JSON text,
a dict as ``{"dict": [[key, value], ...]}`` so that keys keep their type (``{7: 204}``).

:func:`encode` runs inside the learner's kernel, written into each check cell (see
:mod:`jobqueue.teaching.capture`): it takes every primitive it uses from literals (``(0).__class__``),
not from built-in names a learner may have rebound, reads numbers and strings through the
built-in types' own methods (an ``int`` subclass that lies in ``__repr__`` or ``__eq__``
is written as the number it holds), and calls no function of :mod:`json` or any other module.
:func:`decode` runs in the checker.

Anything else (an object of the learner's own class, a NumPy array, a set) is not plain
data: :func:`encode` raises :class:`NotPlainError` with a one-line reason, and the check
counts it as a wrong answer.
"""

from __future__ import annotations

from typing import Any

MAX_CHARS = 50_000
"""Longest encoded value, in characters; a larger one is refused (the kernel caps output too)."""

MAX_DEPTH = 50
"""Deepest nesting of lists and dicts accepted (a list that holds itself is refused)."""

# Every primitive comes from a literal, none from a built-in name a learner could rebind.
_type = (0).__class__.__class__
_NONE = None.__class__
_BOOL = True.__class__
_INT = (0).__class__
_FLOAT = (0.0).__class__
_STR = "".__class__
_LIST: Any = [].__class__
_TUPLE: Any = ().__class__
_DICT: Any = {}.__class__
_SET: Any = {0}.__class__
_len = _STR.__len__
_ENCODE = _STR.encode
_FROM_BYTES = _INT.from_bytes


def _ord(char: str) -> int:
    return _FROM_BYTES(_ENCODE(char, "utf-32-le"), "little")


_MRO = _type.__dict__["__mro__"].__get__
_NAME = _type.__dict__["__name__"].__get__
_FLAGS = _type.__dict__["__flags__"].__get__
_HEAP_TYPE = 1 << 9  # a class made by Python code, not one of the interpreter's own
_INT_COPY: Any = _INT.__pos__
_FLOAT_COPY: Any = _FLOAT.__pos__
_STR_COPY: Any = _STR.__str__
_INT_REPR = _INT.__repr__
_FLOAT_REPR = _FLOAT.__repr__
_STR_ITER = _STR.__iter__
_JOIN = _STR.join
_LIST_ITER = _LIST.__iter__
_TUPLE_ITER = _TUPLE.__iter__
_DICT_ITEMS = _DICT.items
_APPEND = _LIST.append
_SORT = _LIST.sort
_HEX = "0123456789abcdef"
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class NotPlainError(ValueError):
    """A value is not plain data (or too large, or too deep); the message says why in one line."""


def _base(value: object) -> type:
    """The first of the plain types in ``value``'s class hierarchy, else its own class."""
    for cls in _MRO(_type(value)):
        if cls is _BOOL or cls is _INT or cls is _FLOAT or cls is _STR:
            return cls
        if cls is _LIST or cls is _TUPLE or cls is _DICT or cls is _NONE:
            return cls
    return _type(value)


def _u(code: int) -> str:
    return "\\u" + _HEX[(code >> 12) & 15] + _HEX[(code >> 8) & 15] + _HEX[(code >> 4) & 15] + _HEX[code & 15]


def _string(text: str) -> str:
    """``text`` as a JSON string in ASCII: other characters escaped, as surrogate pairs above U+FFFF."""
    parts = ['"']
    for char in _STR_ITER(text):
        code = _ord(char)
        if char in _ESCAPES:
            _APPEND(parts, _ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            _APPEND(parts, char)
        elif code > 0xFFFF:
            code -= 0x10000
            _APPEND(parts, _u(0xD800 | (code >> 10)) + _u(0xDC00 | (code & 0x3FF)))
        else:
            _APPEND(parts, _u(code))
    _APPEND(parts, '"')
    return _JOIN("", parts)


def _number(text: str) -> str:
    if text == "inf":
        return "Infinity"
    if text == "-inf":
        return "-Infinity"
    return "NaN" if text == "nan" else text


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0

    def put(self, text: str) -> None:
        self.size += _len(text)
        if self.size > MAX_CHARS:
            raise NotPlainError(f"the value is too large to check (more than {MAX_CHARS:,} characters)")
        _APPEND(self.parts, text)

    def value(self, value: object, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise NotPlainError(f"the value is nested more than {MAX_DEPTH} deep (or holds itself)")
        kind = _base(value)
        if kind is _NONE:
            self.put("null")
        elif kind is _BOOL:
            self.put("true" if value is True else "false")
        elif kind is _INT:
            try:
                self.put(_INT_REPR(value))
            except ValueError as error:  # more digits than Python converts to text
                raise NotPlainError(f"the number is too large to check: {error}") from None
        elif kind is _FLOAT:
            self.put(_number(_FLOAT_REPR(value)))
        elif kind is _STR:
            self.put(_string(value))  # type: ignore[arg-type]
        elif kind is _LIST or kind is _TUPLE:
            self.put("[")
            items = _LIST_ITER(value) if kind is _LIST else _TUPLE_ITER(value)
            first = True
            for item in items:
                if not first:
                    self.put(",")
                first = False
                self.value(item, depth + 1)
            self.put("]")
        elif kind is _DICT:
            self.put('{"dict":[')
            first = True
            for key, item in _DICT_ITEMS(value):
                self.put("[" if first else ",[")
                first = False
                self.value(key, depth + 1)
                self.put(",")
                self.value(item, depth + 1)
                self.put("]")
            self.put("]}")
        else:
            raise _not_plain(value)


def _not_plain(value: object) -> NotPlainError:
    name = _NAME(_type(value))
    return NotPlainError(
        f"the value is of type {name}, not plain data (numbers, strings, lists, dicts, None)"
    )


def normalize(value: object, depth: int = 0) -> object:
    """``value`` rebuilt from the built-in types alone: what a comparison in a check may see.

    An ``int``, ``float`` or ``str`` subclass becomes the plain value it holds, a tuple stays
    a tuple, a list a list; the methods of the learner's classes are never called.

    Raises:
        NotPlainError: as :func:`encode` does, for anything but plain data.
    """
    if depth > MAX_DEPTH:
        raise NotPlainError(f"the value is nested more than {MAX_DEPTH} deep (or holds itself)")
    kind = _base(value)
    if kind is _NONE or kind is _BOOL:
        return value
    if kind is _INT:
        return _INT_COPY(value)
    if kind is _FLOAT:
        return _FLOAT_COPY(value)
    if kind is _STR:
        return _STR_COPY(value)
    if kind is _LIST:
        return [normalize(item, depth + 1) for item in _LIST_ITER(value)]
    if kind is _TUPLE:
        return _TUPLE([normalize(item, depth + 1) for item in _TUPLE_ITER(value)])
    if kind is _DICT:
        return {normalize(key, depth + 1): normalize(item, depth + 1) for key, item in _DICT_ITEMS(value)}
    raise _not_plain(value)


def encode(value: object) -> str:
    """``value`` as JSON text in ASCII, dicts as ``{"dict": [[key, value], ...]}``.

    Raises:
        NotPlainError: if ``value`` holds anything but plain data, is longer than
            :data:`MAX_CHARS` encoded, or nests deeper than :data:`MAX_DEPTH`.
    """
    writer = _Writer()
    writer.value(value, 0)
    return _JOIN("", writer.parts)


# Signatures below name only built-in types: the typing module is not there in a kernel.
def _length(value: object) -> int:
    """``len``: the object's own ``__len__``, its answer kept only if it is an int."""
    return _INT_COPY(_type(value).__len__(value))  # type: ignore[attr-defined,no-any-return]


def _total(values: list[object], start: object = 0) -> object:
    """``sum``: ``start`` plus each item in turn."""
    total = start
    for value in values:
        total = total + value  # type: ignore[operator]
    return total


def _numbers(*bounds: int) -> object:
    """``range`` as a generator of ints: ``(stop)``, ``(start, stop)`` or ``(start, stop, step)``."""
    count = _TUPLE.__len__(bounds)
    start, stop, step = (0, bounds[0], 1) if count == 1 else (*bounds, 1)[:3]
    if step == 0:
        raise NotPlainError("range() step must not be zero")
    number = _INT_COPY(start)
    while (number < stop) if step > 0 else (number > stop):
        yield number
        number = number + step


def _any(values: list[object]) -> bool:
    """``any``: whether one of ``values`` is true."""
    for value in values:  # noqa: SIM110 - the built-in any may be the learner's
        if value:
            return True
    return False


def _absolute(value: object) -> object:
    """``abs``: the value's own ``__abs__``."""
    return _type(value).__abs__(value)  # type: ignore[attr-defined]


def _rounded(value: object, digits: object = None) -> object:
    """``round``: the value's own ``__round__``, to ``digits`` places if given."""
    if digits is None:
        return _type(value).__round__(value)  # type: ignore[attr-defined]
    return _type(value).__round__(value, digits)  # type: ignore[attr-defined]


def _least(*values: object, key: object = None) -> object:
    """``min`` of one iterable or of several values (the first of equals), by ``key`` if given."""
    items = _LIST(values[0]) if _TUPLE.__len__(values) == 1 else _LIST(values)
    if not items:
        raise NotPlainError("min() of nothing")
    best = items[0]
    best_key = key(best) if key is not None else best  # type: ignore[operator]
    for item in items[1:]:
        item_key = key(item) if key is not None else item  # type: ignore[operator]
        if item_key < best_key:
            best, best_key = item, item_key
    return best


def _in_order(values: object, key: object = None, reverse: bool = False) -> object:
    """``sorted``: a new list of ``values``, sorted by the built-in list's own sort."""
    items = _LIST(values)
    _SORT(items, key=key, reverse=reverse)
    return items


def _assertion_error() -> object:
    """The built-in ``AssertionError``, found among ``Exception``'s own subclasses.

    ``Exception`` is reached from an error the interpreter raises itself (``1 / 0``), caught
    by a context manager made with ``type(...)``, so no class statement and no name is used.
    """
    caught: list[object] = []

    def leave(self: object, kind: object, error: object, trace: object) -> bool:
        _APPEND(caught, kind)
        return True

    with _type("_Catch", (), {"__enter__": lambda self: self, "__exit__": leave})():  # type: ignore[call-overload]
        1 / 0  # noqa: B018 - the error is the point
    exception = _MRO(caught[0])[2]  # ZeroDivisionError, ArithmeticError, Exception
    for cls in _type.__subclasses__(exception):  # type: ignore[attr-defined]
        if _NAME(cls) == "AssertionError" and not _FLAGS(cls) & _HEAP_TYPE:
            return cls
    raise NotPlainError("the built-in AssertionError was not found")


BUILTINS: dict[str, Any] = {
    "AssertionError": _assertion_error(),
    "type": _type,
    "bool": _BOOL,
    "int": _INT,
    "float": _FLOAT,
    "str": _STR,
    "list": _LIST,
    "tuple": _TUPLE,
    "dict": _DICT,
    "len": _length,
    "sum": _total,
    "range": _numbers,
    "set": _SET,
    "any": _any,
    "abs": _absolute,
    "round": _rounded,
    "min": _least,
    "sorted": _in_order,
}
"""The built-in names a check cell may use, each taken from a literal or written here.

A check cell's own uses of these names are rewritten to these values
(:func:`jobqueue.teaching.capture.rewrite_check_cell`), so a learner who rebinds ``len`` or
``builtins.sum`` cannot change what a check computes. A check cell that uses any other
built-in name is refused by the course's own tests.
"""


def decode(text: str) -> object:
    """The value :func:`encode` wrote: lists for lists and tuples, dicts with their key types.

    Raises:
        NotPlainError: if ``text`` is not what :func:`encode` writes.
    """
    import json

    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as error:
        raise NotPlainError(f"the value could not be read: {error}") from None
    return _rebuild(raw, key=False)


def _rebuild(raw: object, *, key: bool) -> object:
    if isinstance(raw, list):
        items = [_rebuild(item, key=key) for item in raw]
        return tuple(items) if key else items
    if isinstance(raw, dict):
        pairs = raw.get("dict")
        if key or list(raw) != ["dict"] or not isinstance(pairs, list):
            raise NotPlainError("the value could not be read: an unexpected JSON object")
        result = {}
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise NotPlainError("the value could not be read: a dict entry is not a pair")
            result[_rebuild(pair[0], key=True)] = _rebuild(pair[1], key=False)
        return result
    if isinstance(raw, float) and raw != raw:
        return float("nan")  # a NaN of its own: json gives every NaN one object, and [x] == [x] holds
    return raw
