"""Base64Codec ("base64"): a BYTES tensor whose elements are base64 of
the bytes meant, as a list of those bytes."""

import base64 as _b64
import binascii
from typing import Any, List, Union

from ..types import Parameters, RequestInput, ResponseOutput
from .base import InputCodec, register_input_codec
from .utils import as_list, is_list_of


def _as_bytes(elem: Union[bytes, str]) -> bytes:
    return elem.encode("ascii") if isinstance(elem, str) else bytes(elem)


def _encode(elem: Union[bytes, str], use_bytes: bool) -> Union[bytes, str]:
    out = _b64.b64encode(_as_bytes(elem))
    return out if use_bytes else out.decode("ascii")


def _decode(elem: Union[bytes, str]) -> bytes:
    raw = _as_bytes(elem)
    try:
        return _b64.b64decode(raw, validate=True)
    except binascii.Error:  # not base64: the bytes as they are, as MLServer
        return raw


@register_input_codec
class Base64Codec(InputCodec):
    ContentType = "base64"
    TypeHint = List[bytes]

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return is_list_of(payload, bytes)

    @classmethod
    def encode_output(cls, name: str, payload: List[bytes], use_bytes: bool = True, **kwargs: Any) -> ResponseOutput:
        return ResponseOutput(name=name, datatype="BYTES", shape=[len(payload), 1],
                              data=[_encode(v, use_bytes) for v in payload],
                              parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> List[bytes]:
        return [_decode(v) for v in as_list(response_output.data)]

    @classmethod
    def encode_input(cls, name: str, payload: List[bytes], use_bytes: bool = True, **kwargs: Any) -> RequestInput:
        out = cls.encode_output(name, payload, use_bytes)
        return RequestInput(name=out.name, datatype=out.datatype, shape=out.shape, data=out.data,
                            parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> List[bytes]:
        return [_decode(v) for v in as_list(request_input.data)]
