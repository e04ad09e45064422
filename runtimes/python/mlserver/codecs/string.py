"""StringCodec ("str"): a BYTES tensor as a list of UTF-8 strings; and
StringRequestCodec, a request of one such input."""

from typing import Any, List, Optional

from .base import register_input_codec, register_request_codec
from .elements import BytesElementsCodec
from .utils import SingleInputRequestCodec


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


@register_input_codec
class StringCodec(BytesElementsCodec):
    """A list of Python strings as a BYTES tensor of shape [n, 1]."""

    ContentType = "str"
    TypeHint = List[str]
    ElementType = str

    @classmethod
    def encode_element(cls, elem: Any, use_bytes: bool) -> Any:
        return encode_str(elem) if use_bytes and isinstance(elem, str) else elem

    @classmethod
    def decode_element(cls, elem: Any) -> Optional[str]:
        return decode_str(elem)


@register_request_codec
class StringRequestCodec(SingleInputRequestCodec):
    """A request whose one input is a list of strings."""

    InputCodec = StringCodec
    ContentType = StringCodec.ContentType
    TypeHint = List[str]
