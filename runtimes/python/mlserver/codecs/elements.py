"""BytesElementsCodec: the shape Base64Codec, DatetimeCodec and StringCodec
share. Each is a list of Python values as a BYTES tensor of shape [n, 1],
one element a value, and differs only in how one element is encoded and
decoded."""

from typing import Any, List, Union

from ..types import Parameters, RequestInput, ResponseOutput
from .base import InputCodec
from .utils import as_list, is_list_of


class BytesElementsCodec(InputCodec):
    """A list of values as a BYTES tensor of shape [n, 1]: a subclass says
    what a value is (ElementType: it encodes a list of those), how one is
    written (encode_element; bytes if use_bytes, else str) and read back
    (decode_element, from bytes or str)."""

    ElementType: Any = None

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return is_list_of(payload, cls.ElementType)

    @classmethod
    def encode_element(cls, elem: Any, use_bytes: bool) -> Union[bytes, str, Any]:
        raise NotImplementedError()

    @classmethod
    def decode_element(cls, elem: Any) -> Any:
        raise NotImplementedError()

    @classmethod
    def encode_output(cls, name: str, payload: List[Any], use_bytes: bool = True, **kwargs: Any) -> ResponseOutput:
        return ResponseOutput(name=name, datatype="BYTES", shape=[len(payload), 1],
                              data=[cls.encode_element(v, use_bytes) for v in payload],
                              parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> List[Any]:
        return [cls.decode_element(v) for v in as_list(response_output.data)]

    @classmethod
    def encode_input(cls, name: str, payload: List[Any], use_bytes: bool = True, **kwargs: Any) -> RequestInput:
        out = cls.encode_output(name, payload, use_bytes=use_bytes)
        return RequestInput(name=out.name, datatype=out.datatype, shape=out.shape, data=out.data,
                            parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> List[Any]:
        return [cls.decode_element(v) for v in as_list(request_input.data)]
