"""Unpickling a CIFAR batch of the Python version with bounded work; used by datafiles.py.

A pickle is a program: unpickling runs its opcodes, and a few hundred bytes of them can name one list
twice, then that pair twice, and so on, until whoever walks the result (numpy.asarray, hash, repr) meets
billions of elements. `load` runs only what a CIFAR batch needs, and refuses the rest:

    globals   numpy's array and dtype reconstruction and scalar, and latin-1 `_codecs.encode` (how
              protocol 2 writes bytes), each checked: an array holds exactly the bytes the file carries
              for it, a dtype is a plain integer one; no other callable, no class
    sharing   a list, dict, tuple, set or array met a second time (the memo, or DUP) is refused, so what
              is built is a tree no bigger than the file: nothing in it unfolds when walked or hashed
    work      at most MAX_OPERATIONS opcodes, each building at most one small object

What comes back is a dict; datafiles.py checks its entries. The unpickler is the Python implementation
(pickle._Unpickler): its opcode table can be wrapped, where the C one runs every opcode out of reach.
"""

from __future__ import annotations

import io
import math
import pickle

import numpy

MAX_OPERATIONS = 2_000_000
"""Most opcodes one batch may run. CIFAR-100's train file, the largest, runs about 200 000 (one per label,
two per file name; the pixels are one string); each opcode builds at most one small object (~100 bytes with
its memo entry), so this also bounds the memory of what is built, apart from the pixel bytes, to ~200 MB."""

INTEGER_DTYPES = frozenset({"u1", "i1", "b1", "u2", "i2", "u4", "i4", "u8", "i8"})
"""dtypes an array or scalar may have, as numpy's pickles spell them: the pixels are u1, labels integers."""

ARRAY_NDIM = 4
"""Most dimensions of an array: CIFAR's pixels are (N, 3072), or (N, 3, 32, 32) once reshaped."""

SHAREABLE = (str, bytes, int, float, type(None), numpy.dtype)
"""What may be met twice: immutable leaves; so may the stand-ins of GLOBALS (a global is named once, then reused)."""


class BatchRefused(pickle.UnpicklingError):
    """What a CIFAR batch does not hold: the message says what and why."""


class _ArrayClass:
    """numpy.ndarray as a pickle names it: a token for _empty_array, never the class (calling it allocates)."""


ARRAY_CLASS = _ArrayClass()


def _plain_dtype(dtype) -> numpy.dtype:
    if not (isinstance(dtype, numpy.dtype) and dtype.kind in "biu" and dtype.itemsize <= 8 and dtype.fields is None
            and dtype.subdtype is None and not dtype.hasobject):
        raise BatchRefused(f"dtype {dtype!r:.40} is not a plain integer dtype")
    return dtype


def _dtype(name, align=False, copy=False) -> numpy.dtype:
    """numpy.dtype(name, align, copy), for the integer dtypes only; always a copy, which BUILD then sets."""
    if not (isinstance(name, str) and name in INTEGER_DTYPES):
        raise BatchRefused(f"dtype {name!r:.40} is not allowed (integers only: {', '.join(sorted(INTEGER_DTYPES))})")
    return numpy.dtype(name, bool(align), True)  # a copy: BUILD must not change numpy's shared dtype


def _empty_array(cls, shape, placeholder) -> numpy.ndarray:
    """numpy's _reconstruct(ndarray, (0,), b"b"): the empty array that BUILD fills; any other shape would allocate."""
    if cls is not ARRAY_CLASS or shape != (0,):
        raise BatchRefused(f"_reconstruct builds an empty numpy.ndarray only, not {shape!r:.40}")
    return numpy.empty(0, dtype=numpy.uint8)


def _from_buffer(buffer, dtype, shape, order) -> numpy.ndarray:
    """numpy's _frombuffer(bytes, dtype, shape, order), protocol 5's array: the bytes exactly the shape's."""
    _check_shape(shape)
    if not isinstance(buffer, (bytes, bytearray)) or math.prod(shape) * _plain_dtype(dtype).itemsize != len(buffer):
        raise BatchRefused(f"an array of shape {shape} needs its {math.prod(shape)} elements' bytes in the file")
    if order not in ("C", "F"):
        raise BatchRefused(f"array order {order!r:.20} is not C or F")
    return numpy.frombuffer(buffer, dtype=dtype).reshape(shape, order=order)


def _scalar(dtype, data) -> int:
    """numpy's scalar(dtype, bytes): a label pickled as numpy.int64 and the like, as a Python int."""
    _plain_dtype(dtype)
    raw = data.encode("latin1") if isinstance(data, str) else data  # Python 2's str, read as latin-1
    if not isinstance(raw, bytes) or len(raw) != dtype.itemsize:
        raise BatchRefused(f"a {dtype} scalar needs {dtype.itemsize} bytes")
    return numpy.frombuffer(raw, dtype=dtype)[0].item()


def _latin1(text, encoding="latin1") -> bytes:
    """_codecs.encode(text, "latin1"): protocol 2's way of writing bytes from Python 3."""
    if not isinstance(text, str) or encoding != "latin1":
        raise BatchRefused(f"_codecs.encode with {encoding!r:.20} is not allowed (latin1 only)")
    return text.encode("latin1")


def _empty_bytes(*args) -> bytes:
    """bytes(): protocol 2's way of writing b"" from Python 3."""
    if args:
        raise BatchRefused("bytes(...) is allowed without arguments only")
    return b""


GLOBALS = {
    ("numpy", "ndarray"): ARRAY_CLASS,
    ("numpy", "dtype"): _dtype,
    ("numpy.core.multiarray", "_reconstruct"): _empty_array,  # numpy 1 (and CIFAR's own files)
    ("numpy._core.multiarray", "_reconstruct"): _empty_array,  # numpy 2
    ("numpy.core.numeric", "_frombuffer"): _from_buffer,  # pickle protocol 5 (Python 3.14's default)
    ("numpy._core.numeric", "_frombuffer"): _from_buffer,
    ("numpy.core.multiarray", "scalar"): _scalar,
    ("numpy._core.multiarray", "scalar"): _scalar,
    ("_codecs", "encode"): _latin1,
    ("builtins", "bytes"): _empty_bytes,
    ("__builtin__", "bytes"): _empty_bytes,  # as Python 2 names it
}
"""Every global a batch may name, and what it gets instead: the checked stand-ins above."""

_STAND_INS = {id(stand_in) for stand_in in GLOBALS.values()}


def _check_shape(shape) -> None:
    if not (isinstance(shape, tuple) and len(shape) <= ARRAY_NDIM
            and all(isinstance(n, int) and n >= 0 for n in shape)):
        raise BatchRefused(f"array shape {shape!r:.60} is not a tuple of at most {ARRAY_NDIM} sizes")


def _check_array_state(array, state) -> None:
    """BUILD of an array: numpy's (version, shape, dtype, fortran, raw bytes), the bytes exactly the shape's."""
    if array.size or not isinstance(state, tuple) or len(state) not in (4, 5):
        raise BatchRefused("an array is built once, from numpy's (version, shape, dtype, order, bytes) state")
    shape, dtype, _, raw = state[-4:]
    _check_shape(shape)
    if not isinstance(raw, (bytes, str)) or math.prod(shape) * _plain_dtype(dtype).itemsize != len(raw):
        raise BatchRefused(f"an array of shape {shape} needs its {math.prod(shape)} elements' bytes in the file")


def _check_dtype_state(state) -> None:
    """BUILD of a dtype: numpy's (version, byte order, subarray, names, fields, ...), no subarray or fields."""
    if not (isinstance(state, tuple) and len(state) >= 5 and state[2:5] == (None, None, None)):
        raise BatchRefused("a dtype's state may not add a subarray or fields")


class _Unpickler(pickle._Unpickler):
    """Runs only a CIFAR batch's opcodes and globals, counting them; see the module docstring."""

    def __init__(self, file, operations: int):
        super().__init__(file, encoding="latin1")  # CIFAR's files are Python 2 pickles: str read as latin-1
        self.operations, self.operations_left = operations, operations

    def find_class(self, module: str, name: str):
        if (module, name) not in GLOBALS:
            raise BatchRefused(
                f"{module}.{name} is not allowed in a CIFAR batch (arrays, lists, numbers, strings only)")
        return GLOBALS[module, name]

    def persistent_load(self, pid):
        raise BatchRefused("persistent references are not allowed in a CIFAR batch")


def _counted(load):
    def counted(self):
        self.operations_left -= 1
        if self.operations_left < 0:
            raise BatchRefused(f"more than {self.operations:,} pickle operations: far more than a CIFAR batch holds")
        load(self)
    return counted


def _unshared(load):
    """A memo read (or DUP) that pushes a container pushes a second reference to it: refused."""
    def unshared(self):
        load(self)
        value = self.stack[-1]
        if not (isinstance(value, SHAREABLE) or id(value) in _STAND_INS or (type(value) is tuple and not value)):
            raise BatchRefused(f"a {type(value).__name__} is used twice: a CIFAR batch shares no list, dict or tuple, "
                               "and shared ones are how a few hundred bytes unfold into billions of elements")
    return unshared


def _checked_build(load):
    """BUILD sets the state of the arrays and dtypes the stand-ins made, checked first, and of nothing else."""
    def checked_build(self):
        state, target = self.stack[-1], self.stack[-2]
        if isinstance(target, numpy.ndarray):
            _check_array_state(target, state)
        elif isinstance(target, numpy.dtype):
            _check_dtype_state(state)
        else:
            raise BatchRefused(f"setting the state of a {type(target).__name__} is not allowed in a CIFAR batch")
        load(self)
        if isinstance(target, numpy.dtype):
            _plain_dtype(target)
    return checked_build


_Unpickler.dispatch = {code: _counted(load) for code, load in pickle._Unpickler.dispatch.items()}
for _opcode in (pickle.GET, pickle.BINGET, pickle.LONG_BINGET, pickle.DUP):
    _Unpickler.dispatch[_opcode[0]] = _counted(_unshared(pickle._Unpickler.dispatch[_opcode[0]]))
_Unpickler.dispatch[pickle.BUILD[0]] = _counted(_checked_build(pickle._Unpickler.dispatch[pickle.BUILD[0]]))


def load(raw: bytes, operations: int | None = None) -> object:
    """The object a CIFAR batch's bytes describe, built within the limits above; BatchRefused (or the usual
    pickle errors, on a malformed file) otherwise."""
    return _Unpickler(io.BytesIO(raw), MAX_OPERATIONS if operations is None else operations).load()
