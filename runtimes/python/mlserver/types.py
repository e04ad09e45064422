"""mlserver.types: MLServer's request and response types, for runtimes
written against MLServer (``from mlserver.types import InferenceRequest``).

They are llmserve_runtime's types with MLServer's extras: keyword
construction, ``data`` as a TensorData (``.root``, also ``.__root__``;
iterable, indexable, and NumPy reads it), equality by value, and
pydantic's ``dict()`` / ``model_dump()`` / ``json()`` and
``parse_obj()`` / ``model_validate()`` / ``parse_raw()``. They are plain
classes, not pydantic models: there is no validation beyond the
datatypes.
"""

import json
from enum import Enum
from typing import Any, Dict, List, Optional

import numpy as np

from llmserve_runtime import types as _rt


class Datatype(str, Enum):
    BOOL = "BOOL"
    UINT8 = "UINT8"
    UINT16 = "UINT16"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    INT8 = "INT8"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    FP16 = "FP16"
    FP32 = "FP32"
    FP64 = "FP64"
    BYTES = "BYTES"

    def __str__(self) -> str:
        return self.value


def _datatype(d: Any) -> str:
    if isinstance(d, Enum):
        d = d.value
    d = str(d)
    Datatype(d)  # ValueError for a name that is not a V2 datatype
    return d


def _same(a: Any, b: Any) -> bool:
    """Equality that holds NumPy arrays and lists of the same values equal."""
    if isinstance(a, TensorData):
        a = a.root
    if isinstance(b, TensorData):
        b = b.root
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.ravel(np.asarray(a)), np.ravel(np.asarray(b))))
        except (TypeError, ValueError):
            return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _plain(v: Any, as_json: bool = False) -> Any:
    """v as plain Python values (lists, dicts, numbers, str; bytes kept
    unless as_json, then decoded as UTF-8)."""
    if isinstance(v, _Base):
        return v.dict()
    if isinstance(v, Parameters):
        return {k: _plain(x, as_json) for k, x in v.dict().items()}
    if isinstance(v, TensorData):
        return _plain(v.root, as_json)
    if isinstance(v, np.ndarray):
        return _plain(v.tolist(), as_json)
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, (list, tuple)):
        return [_plain(x, as_json) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x, as_json) for k, x in v.items()}
    if as_json and isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", errors="replace")
    return v


class TensorData:
    """A tensor's data, as MLServer's TensorData: the value is ``root``
    (flat or nested list, a NumPy array as llmserve delivers numeric
    inputs, bytes or str)."""

    __slots__ = ("root",)

    def __init__(self, root: Any = None) -> None:
        self.root = root.root if isinstance(root, TensorData) else root

    @property
    def __root__(self) -> Any:  # pydantic v1's name
        return self.root

    def __iter__(self):
        return iter(self.root)

    def __len__(self) -> int:
        return len(self.root)

    def __getitem__(self, i: Any) -> Any:
        return self.root[i]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.root, dtype=dtype)

    def __eq__(self, other: object) -> bool:
        return _same(self, other)

    def __repr__(self) -> str:
        return "TensorData(%r)" % (self.root,)


class Parameters(_rt.Parameters):
    """Open-ended parameters (content_type, headers, anything else)."""

    def model_dump(self, exclude_none: bool = False, **kwargs: Any) -> Dict[str, Any]:
        return {k: v for k, v in self.dict().items() if not (exclude_none and v is None)}

    @classmethod
    def parse_obj(cls, obj: Any) -> "Parameters":
        if obj is None or isinstance(obj, Parameters):
            return obj
        if isinstance(obj, _rt.Parameters):
            return cls(**obj.dict())
        return cls(**dict(obj))

    model_validate = parse_obj


def _params(p: Any) -> Optional[Parameters]:
    if p is None or isinstance(p, Parameters):
        return p
    return Parameters.parse_obj(p.dict() if isinstance(p, _rt.Parameters) else p)


class _Base:
    """Value equality, dict/json and parsing, from _fields."""

    _fields: tuple = ()
    _nested: Dict[str, Any] = {}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Base) or self._fields != other._fields:
            return NotImplemented
        return all(_same(getattr(self, f), getattr(other, f)) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (f, getattr(self, f)) for f in self._fields))

    def dict(self, exclude_none: bool = False, **kwargs: Any) -> Dict[str, Any]:
        out = {}
        for f in self._fields:
            v = getattr(self, f)
            if exclude_none and v is None:
                continue
            out[f] = _plain(v)
        return out

    model_dump = dict

    def json(self, **kwargs: Any) -> str:
        return json.dumps(_plain(self.dict(exclude_none=True), as_json=True))

    model_dump_json = json

    @classmethod
    def parse_obj(cls, obj: Any):
        if isinstance(obj, cls):
            return obj
        kw = dict(obj)
        for f, sub in cls._nested.items():
            v = kw.get(f)
            if v is None:
                continue
            kw[f] = [sub.parse_obj(x) for x in v] if isinstance(v, list) else sub.parse_obj(v)
        return cls(**kw)

    model_validate = parse_obj

    @classmethod
    def parse_raw(cls, raw: Any):
        return cls.parse_obj(json.loads(raw))

    model_validate_json = parse_raw

    def copy(self, deep: bool = False):
        import copy as _copy
        return _copy.deepcopy(self) if deep else _copy.copy(self)


class _Tensor(_Base):
    """A request input or response output: its data is always a TensorData."""
    _fields = ("name", "shape", "datatype", "parameters", "data")
    _nested = {"parameters": Parameters}

    def __init__(self, name: str, shape: List[int], datatype: Any, data: Any = None,
                 parameters: Any = None, **kwargs: Any) -> None:
        super().__init__(name, list(shape), _datatype(datatype), data, _params(parameters))

    @property
    def data(self) -> TensorData:
        return self._data

    @data.setter
    def data(self, v: Any) -> None:
        self._data = TensorData(v)


class RequestInput(_Tensor, _rt.RequestInput):
    pass


class ResponseOutput(_Tensor, _rt.ResponseOutput):
    pass


class RequestOutput(_Base, _rt.RequestOutput):
    _fields = ("name", "parameters")
    _nested = {"parameters": Parameters}

    def __init__(self, name: str, parameters: Any = None, **kwargs: Any) -> None:
        _rt.RequestOutput.__init__(self, name, _params(parameters))


class InferenceRequest(_Base, _rt.InferenceRequest):
    _fields = ("id", "parameters", "inputs", "outputs")
    _nested = {"parameters": Parameters, "inputs": RequestInput, "outputs": RequestOutput}

    def __init__(self, inputs: Optional[List[RequestInput]] = None, id: Optional[str] = None,
                 parameters: Any = None, outputs: Optional[List[RequestOutput]] = None, **kwargs: Any) -> None:
        _rt.InferenceRequest.__init__(self, list(inputs or []), id, _params(parameters), outputs)


class InferenceResponse(_Base, _rt.InferenceResponse):
    _fields = ("model_name", "model_version", "id", "parameters", "outputs")
    _nested = {"parameters": Parameters, "outputs": ResponseOutput}

    def __init__(self, model_name: str = "", outputs: Optional[List[ResponseOutput]] = None,
                 model_version: Optional[str] = None, id: Optional[str] = None,
                 parameters: Any = None, **kwargs: Any) -> None:
        _rt.InferenceResponse.__init__(self, model_name, list(outputs or []), model_version, id, _params(parameters))


class MetadataTensor(_Base):
    _fields = ("name", "datatype", "shape", "parameters")
    _nested = {"parameters": Parameters}

    def __init__(self, name: str, datatype: Any, shape: List[int], parameters: Any = None, **kwargs: Any) -> None:
        self.name, self.datatype, self.shape = name, _datatype(datatype), list(shape)
        self.parameters = _params(parameters)


class MetadataModelResponse(_Base):
    _fields = ("name", "versions", "platform", "inputs", "outputs", "parameters")
    _nested = {"parameters": Parameters, "inputs": MetadataTensor, "outputs": MetadataTensor}

    def __init__(self, name: str, versions: Optional[List[str]] = None, platform: str = "",
                 inputs: Optional[List[MetadataTensor]] = None, outputs: Optional[List[MetadataTensor]] = None,
                 parameters: Any = None, **kwargs: Any) -> None:
        self.name, self.versions, self.platform = name, versions, platform
        self.inputs, self.outputs, self.parameters = inputs, outputs, _params(parameters)


class MetadataServerResponse(_Base):
    _fields = ("name", "version", "extensions")

    def __init__(self, name: str, version: str, extensions: Optional[List[str]] = None, **kwargs: Any) -> None:
        self.name, self.version, self.extensions = name, version, list(extensions or [])


__all__ = [
    "Datatype", "TensorData", "Parameters", "RequestInput", "RequestOutput", "ResponseOutput",
    "InferenceRequest", "InferenceResponse", "MetadataTensor", "MetadataModelResponse", "MetadataServerResponse",
]
