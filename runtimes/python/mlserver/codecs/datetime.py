"""DatetimeCodec ("datetime"): a BYTES tensor of ISO 8601 dates as a list
of datetime objects."""

from datetime import datetime
from typing import List, Union

from .base import register_input_codec
from .elements import BytesElementsCodec

_Datetime = Union[str, datetime]


@register_input_codec
class DatetimeCodec(BytesElementsCodec):
    ContentType = "datetime"
    TypeHint = List[_Datetime]
    ElementType = datetime

    @classmethod
    def encode_element(cls, elem: _Datetime, use_bytes: bool) -> Union[bytes, str]:
        iso = elem if isinstance(elem, str) else elem.isoformat()
        return iso.encode("ascii") if use_bytes else iso

    @classmethod
    def decode_element(cls, elem: Union[bytes, str]) -> datetime:
        return datetime.fromisoformat(elem if isinstance(elem, str) else bytes(elem).decode("ascii"))
