"""NumpyCodec ("np"): a tensor as a NumPy array of its shape; and
NumpyRequestCodec, a request of one such input."""

from typing import Any

import numpy as np

from ..types import Datatype, Parameters, RequestInput, ResponseOutput, TensorData
from .base import InputCodec, register_input_codec, register_request_codec
from .utils import InputOrOutput, SingleInputRequestCodec, inject_batch_dimension, is_list_of

_TO_NUMPY = {
    "BOOL": "bool", "UINT8": "uint8", "UINT16": "uint16", "UINT32": "uint32", "UINT64": "uint64",
    "INT8": "int8", "INT16": "int16", "INT32": "int32", "INT64": "int64",
    "FP16": "float16", "FP32": "float32", "FP64": "float64",
}
_FROM_NUMPY = {v: Datatype(k) for k, v in _TO_NUMPY.items()}


def to_dtype(input_or_output: InputOrOutput) -> np.dtype:
    """The NumPy dtype of a tensor: its datatype's; for BYTES, str for
    string data, else fixed-width bytes of the last dimension (MLServer's
    reading of BYTES as a byte buffer), or object for one bytes element
    per tensor element."""
    datatype = str(input_or_output.datatype)
    if datatype != "BYTES":
        return np.dtype(_TO_NUMPY[datatype])
    data = input_or_output.data.root if isinstance(input_or_output.data, TensorData) else input_or_output.data
    if isinstance(data, (bytes, bytearray)):
        data = [data]
    if is_list_of(data, str):
        return np.dtype(str)
    shape = list(input_or_output.shape)
    if isinstance(data, list) and len(data) == int(np.prod(shape)) and len(data) > 0:
        return np.dtype(object)
    return np.dtype((bytes, shape[-1] if shape else 1))


def to_datatype(dtype: Any) -> Datatype:
    dtype = np.dtype(dtype)
    if dtype.kind in ("O", "S", "U"):
        return Datatype.BYTES
    name = str(dtype)
    if name not in _FROM_NUMPY:
        raise ValueError("NumPy dtype %s has no V2 datatype" % dtype)
    return _FROM_NUMPY[name]


def _to_ndarray(input_or_output: InputOrOutput) -> np.ndarray:
    data = input_or_output.data.root if isinstance(input_or_output.data, TensorData) else input_or_output.data
    dtype = to_dtype(input_or_output)
    if str(input_or_output.datatype) == "BYTES":
        if isinstance(data, (bytes, bytearray)):
            data = [bytes(data)]
        if dtype == np.dtype(object):
            arr = np.empty(len(data), dtype=object)
            arr[:] = list(data)
            return arr
        if is_list_of(data, (bytes, bytearray)):
            return np.concatenate([np.frombuffer(b, dtype) for b in data])
    return np.asarray(data, dtype)


def _encode_data(payload: np.ndarray, datatype: Datatype) -> Any:
    """The flat data: a NumPy array for numbers (a list with None for NaN,
    which JSON has no number for, as MLServer writes it); for strings
    their UTF-8; fixed-width bytes as one buffer; objects as they are."""
    if datatype == Datatype.BYTES:
        if payload.dtype.kind == "U":
            return [s.encode("utf-8") for s in payload.reshape(-1).tolist()]
        if payload.dtype.kind == "S":
            return [payload.tobytes()]
        return payload.reshape(-1).tolist()
    flat = np.ascontiguousarray(payload).reshape(-1)
    if flat.dtype.kind == "f" and np.isnan(flat).any():
        return [None if np.isnan(v) else v for v in flat.tolist()]
    return flat


@register_input_codec
class NumpyCodec(InputCodec):
    """A tensor as a NumPy array of its shape."""

    ContentType = "np"
    TypeHint = np.ndarray

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return isinstance(payload, np.ndarray)

    @classmethod
    def encode_output(cls, name: str, payload: np.ndarray, **kwargs: Any) -> ResponseOutput:
        payload = np.asarray(payload)
        datatype = to_datatype(payload.dtype)
        return ResponseOutput(name=name, datatype=datatype, shape=inject_batch_dimension(list(payload.shape)),
                              data=_encode_data(payload, datatype), parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> np.ndarray:
        return cls.decode_input(response_output)  # type: ignore[arg-type]

    @classmethod
    def encode_input(cls, name: str, payload: np.ndarray, **kwargs: Any) -> RequestInput:
        out = cls.encode_output(name, payload)
        return RequestInput(name=out.name, datatype=out.datatype, shape=out.shape, data=out.data,
                            parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> np.ndarray:
        return _to_ndarray(request_input).reshape(request_input.shape)


@register_request_codec
class NumpyRequestCodec(SingleInputRequestCodec):
    """A request whose one input is a NumPy array."""

    InputCodec = NumpyCodec
    ContentType = NumpyCodec.ContentType
