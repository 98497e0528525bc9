"""What runs inside a grading sandbox, and the data format both sides speak.

The grader puts this file, read-only, into the sandbox's work folder and starts ``python
sandbox_driver.py`` there. The driver says ``{"ready": true}`` once it has loaded IPython, then reads
one JSON request per line on its standard input and writes one JSON answer per line on its standard
output:

- ``{"op": "run", "source": ..., "timeout": s}``: run a cell of the submission in an IPython shell;
  answers ``{"ok": bool, "ename": ..., "evalue": ...}``.
- ``{"op": "names", "names": [...]}``: which of these names the submission defines, and whether each
  is callable; answers ``{"defined": {name: callable}}``.
- ``{"op": "get", "name": ..., "timeout": s}``: the value of a name, encoded; answers ``{"value": ...}``.
- ``{"op": "call", "name": ..., "args": [...], "kwargs": {...}, "timeout": s}``: call a function of the
  submission on inputs the grader chose; answers ``{"value": ...}`` or ``{"raised": {"type", "message"}}``.

Values travel as tagged JSON (:func:`encode`, :func:`decode`): numbers, strings, lists, tuples, dicts
with string keys, numpy arrays of booleans and numbers (their raw bytes in base64) and the named tuples
of ``attnbook`` (rebuilt from their fields). Nothing is pickled, so decoding an answer never runs code
of the submission. Only inputs ever enter the sandbox; expected values stay with the grader.

The grader imports this module for the same :func:`encode` and :func:`decode` (one implementation).
"""

from __future__ import annotations

import base64
import builtins
import importlib
import json
import math
import os
import re
import signal
import sys

import numpy as np  # imported once: an interrupt that lands in an import statement can break later imports

MAX_LINE_BYTES = 64 * 1024 * 1024  # one answer; an array larger than this is refused
MAX_DEPTH = 32
MAX_TEXT = 500  # characters of an exception message that travel back
ARRAY_KINDS = "biuf"  # booleans, signed and unsigned integers, floats: no objects, no strings
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")


class WireError(ValueError):
    """An encoded value that does not follow the format; the message says where."""


class Unreadable:
    """Stands for a value of a type the format does not carry (a function, a custom object...)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name} the grader cannot read>"


def encode(value, depth: int = 0):
    """A JSON-ready form of ``value``; types the format does not carry become ``unreadable``."""
    if depth > MAX_DEPTH:
        return {"t": "unreadable", "type": "deeply nested value"}
    if value is None:
        return {"t": "none"}
    if isinstance(value, (bool, np.bool_)):
        return {"t": "bool", "v": bool(value)}
    if isinstance(value, int) and not isinstance(value, np.generic):
        return {"t": "int", "v": str(value)}
    if isinstance(value, float) and not isinstance(value, np.generic):
        return {"t": "float", "v": repr(value)}
    if isinstance(value, str):
        return {"t": "str", "v": value}
    if isinstance(value, np.generic) and value.dtype.kind in ARRAY_KINDS:
        return {"t": "scalar", **_array_fields(np.asarray(value))}
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in ARRAY_KINDS:
            return {"t": "unreadable", "type": f"array of dtype {value.dtype}"}
        return {"t": "array", **_array_fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields") and type(value).__module__.startswith("attnbook."):
        kind = type(value)
        return {"t": "named", "type": f"{kind.__module__}.{kind.__qualname__}",
                "v": [encode(item, depth + 1) for item in value]}
    if isinstance(value, (list, tuple)):
        return {"t": "list" if isinstance(value, list) else "tuple", "v": [encode(item, depth + 1) for item in value]}
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {"t": "dict", "v": [[key, encode(item, depth + 1)] for key, item in value.items()]}
    return {"t": "unreadable", "type": type(value).__name__[:100]}


def _array_fields(array) -> dict:
    array = np.array(array, order="C", copy=True)  # keeps a 0-d array 0-d, unlike ascontiguousarray
    return {"dtype": array.dtype.str, "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def decode(data, depth: int = 0):
    """The value an :func:`encode` form stands for, checked strictly; a WireError for anything else."""
    if depth > MAX_DEPTH:
        raise WireError("nested too deeply")
    if not isinstance(data, dict) or not isinstance(data.get("t"), str):
        raise WireError(f"expected a tagged value, got {type(data).__name__}")
    tag = data["t"]
    expected_keys = {"none": {"t"}, "bool": {"t", "v"}, "int": {"t", "v"}, "float": {"t", "v"}, "str": {"t", "v"},
                     "list": {"t", "v"}, "tuple": {"t", "v"}, "dict": {"t", "v"}, "named": {"t", "type", "v"},
                     "array": {"t", "dtype", "shape", "data"}, "scalar": {"t", "dtype", "shape", "data"},
                     "unreadable": {"t", "type"}}
    if tag not in expected_keys:
        raise WireError(f"unknown tag {tag!r}")
    if set(data) != expected_keys[tag]:
        raise WireError(f"a {tag} has the keys {sorted(data)}, expected {sorted(expected_keys[tag])}")
    value = data.get("v")
    if tag == "none":
        return None
    if tag == "bool":
        if not isinstance(value, bool):
            raise WireError("a bool that is not true or false")
        return value
    if tag == "int":
        if not isinstance(value, str) or not re.fullmatch(r"-?[0-9]{1,4000}", value):
            raise WireError("an int that is not a string of digits")
        return int(value)
    if tag == "float":
        if not isinstance(value, str) or len(value) > 40:
            raise WireError("a float that is not a short string")
        try:
            return float(value)
        except ValueError:
            raise WireError(f"a float that does not parse: {value[:40]!r}") from None
    if tag == "str":
        if not isinstance(value, str):
            raise WireError("a str that is not a string")
        return value
    if tag in ("list", "tuple", "named"):
        if not isinstance(value, list):
            raise WireError(f"a {tag} whose items are not a list")
        items = [decode(item, depth + 1) for item in value]
        if tag == "list":
            return items
        if tag == "tuple":
            return tuple(items)
        kind = named_type(data["type"])
        if len(items) != len(kind._fields):
            raise WireError(f"{data['type']} has {len(kind._fields)} fields, got {len(items)}")
        return kind(*items)
    if tag == "dict":
        if not isinstance(value, list):
            raise WireError("a dict whose items are not a list")
        result = {}
        for pair in value:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
                raise WireError("a dict item that is not a [string, value] pair")
            result[pair[0]] = decode(pair[1], depth + 1)
        return result
    if tag == "unreadable":
        if not isinstance(data["type"], str):
            raise WireError("an unreadable value without a type name")
        return Unreadable(data["type"][:100])
    # arrays and numpy scalars
    dtype_text, shape, text = data["dtype"], data["shape"], data["data"]
    if not isinstance(dtype_text, str) or not re.fullmatch(r"[<>|=][biuf][0-9]{1,2}", dtype_text):
        raise WireError(f"an array of dtype {str(dtype_text)[:20]!r}, not booleans or numbers")
    dtype = np.dtype(dtype_text)
    if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape)
            and len(shape) <= 32):
        raise WireError("an array whose shape is not a list of sizes")
    if not isinstance(text, str) or len(text) > MAX_LINE_BYTES:
        raise WireError("an array whose data is not a base64 string")
    raw = base64.b64decode(text.encode(), validate=True)
    count = math.prod(shape)
    if len(raw) != count * dtype.itemsize:
        raise WireError(f"an array of shape {tuple(shape)} and dtype {dtype} with {len(raw)} bytes of data")
    array = np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    if tag == "scalar":
        if shape:
            raise WireError("a numpy scalar with a shape")
        return array[()]
    return array


def named_type(qualified: str):
    """An ``attnbook`` named tuple class from its ``module.Class`` name; nothing else is rebuilt."""
    if not isinstance(qualified, str) or not re.fullmatch(r"attnbook(\.[A-Za-z_][A-Za-z0-9_]*)+", qualified):
        raise WireError(f"{str(qualified)[:80]!r} is not an attnbook type")
    module_name, _, class_name = qualified.rpartition(".")
    try:
        kind = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        raise WireError(f"no type {qualified} in attnbook") from None
    if not (isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields")):
        raise WireError(f"{qualified} is not a named tuple of attnbook")
    return kind


def raised(error: BaseException) -> dict:
    """An exception as data: its class name and the start of its message."""
    message = str(error)
    return {"type": type(error).__name__[:100], "message": message[:MAX_TEXT]}


def exception_from(data) -> Exception:
    """The grader's side of :func:`raised`: the same built-in class, or a new class of the same name."""
    if not (isinstance(data, dict) and set(data) == {"type", "message"} and isinstance(data["type"], str)
            and isinstance(data["message"], str)):
        raise WireError("an exception that is not {type, message}")
    name = data["type"] if NAME.fullmatch(data["type"]) else "Exception"
    kind = getattr(builtins, name, None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)):
        kind = type(name, (Exception,), {"__module__": "submission"})
    return kind(data["message"][:MAX_TEXT])


# --- the driver ---------------------------------------------------------------------------------------


class _Timer:
    """Raises KeyboardInterrupt in the running code after ``seconds``, as a Jupyter interrupt would."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __enter__(self):
        signal.signal(signal.SIGALRM, _interrupt)
        signal.setitimer(signal.ITIMER_REAL, max(0.01, float(self.seconds)))
        return self

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        return False


def _interrupt(signum, frame):
    raise KeyboardInterrupt("interrupted by the grader's timeout")


def serve() -> None:
    """Answer requests until the grader closes the standard input."""
    requests = os.fdopen(os.dup(0), "rb")
    answers = os.fdopen(os.dup(1), "wb")
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    log = os.open("cells.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # what the cells print
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdin = open(os.devnull)

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)

    def answer(message: dict) -> None:
        answers.write(json.dumps(message).encode() + b"\n")
        answers.flush()

    answer({"ready": True})  # IPython and numpy are loaded: the grader's timeouts start from here
    for line in requests:
        request = json.loads(line)
        op = request.get("op")
        if op == "run":
            try:
                with _Timer(request["timeout"]):
                    outcome = shell.run_cell(request["source"], store_history=False)
                error = outcome.error_before_exec or outcome.error_in_exec
            except BaseException as caught:  # noqa: BLE001 - the interrupt can land outside run_cell's own handler
                error = caught
            if error is None:
                answer({"ok": True, "ename": "", "evalue": ""})
            else:
                answer({"ok": False, **{"ename": raised(error)["type"], "evalue": raised(error)["message"]}})
        elif op == "names":
            names = shell.user_ns
            answer({"defined": {name: callable(names[name]) for name in request["names"] if name in names}})
        elif op == "get":
            try:
                with _Timer(request["timeout"]):
                    value = encode(shell.user_ns.get(request["name"]))
            except BaseException as error:  # noqa: BLE001 - too large, too deep, too slow: unreadable
                value = {"t": "unreadable", "type": f"value that could not be sent ({type(error).__name__})"}
            answer({"value": value})
        elif op == "call":
            try:
                function = shell.user_ns[request["name"]]
                args = [decode(item) for item in request["args"]]
                kwargs = {key: decode(item) for key, item in request["kwargs"].items()}
                with _Timer(request["timeout"]):
                    value = function(*args, **kwargs)
                answer({"value": encode(value)})
            except BaseException as error:  # noqa: BLE001 - every failure of the student's code is data
                if isinstance(error, KeyboardInterrupt):
                    error = TimeoutError(f"{request['name']} ran longer than {request['timeout']:g} s")
                answer({"raised": raised(error)})
        else:
            answer({"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    serve()
