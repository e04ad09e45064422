"""Base64Codec ("base64"): a BYTES tensor whose elements are base64 of
the bytes meant, as a list of those bytes."""

import base64 as _b64
import binascii
from typing import List, Union

from .base import register_input_codec
from .elements import BytesElementsCodec


def _as_bytes(elem: Union[bytes, str]) -> bytes:
    return elem.encode("ascii") if isinstance(elem, str) else bytes(elem)


@register_input_codec
class Base64Codec(BytesElementsCodec):
    ContentType = "base64"
    TypeHint = List[bytes]
    ElementType = bytes

    @classmethod
    def encode_element(cls, elem: Union[bytes, str], use_bytes: bool) -> Union[bytes, str]:
        out = _b64.b64encode(_as_bytes(elem))
        return out if use_bytes else out.decode("ascii")

    @classmethod
    def decode_element(cls, elem: Union[bytes, str]) -> bytes:
        raw = _as_bytes(elem)
        try:
            return _b64.b64decode(raw, validate=True)
        except binascii.Error:  # not base64: the bytes as they are, as MLServer
            return raw
