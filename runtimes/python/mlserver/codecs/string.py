"""StringCodec ("str"): a BYTES tensor as a list of UTF-8 strings; and
StringRequestCodec, a request of one such input."""

from typing import Any, List, Optional

from ..types import Parameters, RequestInput, ResponseOutput
from .base import InputCodec, register_input_codec, register_request_codec
from .utils import InputOrOutput, SingleInputRequestCodec, as_list, is_list_of


def encode_str(elem: str) -> bytes:
    return elem.encode("utf-8")


def decode_str(elem: Any) -> Optional[str]:
    if elem is None:
        return None
    if isinstance(elem, (bytes, bytearray)):
        return bytes(elem).decode("utf-8")
    if isinstance(elem, str):
        return elem
    return ""


def _decode(input_or_output: InputOrOutput) -> List[str]:
    return [decode_str(v) for v in as_list(input_or_output.data)]


@register_input_codec
class StringCodec(InputCodec):
    """A list of Python strings as a BYTES tensor of shape [n, 1]."""

    ContentType = "str"
    TypeHint = List[str]

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return is_list_of(payload, str)

    @classmethod
    def encode_output(cls, name: str, payload: List[str], use_bytes: bool = True, **kwargs: Any) -> ResponseOutput:
        data = [encode_str(v) if use_bytes and isinstance(v, str) else v for v in payload]
        return ResponseOutput(name=name, datatype="BYTES", shape=[len(payload), 1], data=data,
                              parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> List[str]:
        return _decode(response_output)

    @classmethod
    def encode_input(cls, name: str, payload: List[str], use_bytes: bool = True, **kwargs: Any) -> RequestInput:
        out = cls.encode_output(name, payload, use_bytes)
        return RequestInput(name=out.name, datatype=out.datatype, shape=out.shape, data=out.data,
                            parameters=out.parameters)

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> List[str]:
        return _decode(request_input)


@register_request_codec
class StringRequestCodec(SingleInputRequestCodec):
    """A request whose one input is a list of strings."""

    InputCodec = StringCodec
    ContentType = StringCodec.ContentType
    TypeHint = List[str]
