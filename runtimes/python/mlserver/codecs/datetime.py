"""DatetimeCodec ("datetime"): a BYTES tensor of ISO 8601 dates as a list
of datetime objects."""

from datetime import datetime
from typing import Any, List, Union

from ..types import Parameters, RequestInput, ResponseOutput
from .base import InputCodec, register_input_codec
from .utils import as_list, is_list_of

_Datetime = Union[str, datetime]


def _encode(elem: _Datetime, use_bytes: bool) -> Union[bytes, str]:
    iso = elem if isinstance(elem, str) else elem.isoformat()
    return iso.encode("ascii") if use_bytes else iso


def _decode(elem: Union[bytes, str]) -> datetime:
    return datetime.fromisoformat(elem if isinstance(elem, str) else bytes(elem).decode("ascii"))


@register_input_codec
class DatetimeCodec(InputCodec):
    ContentType = "datetime"
    TypeHint = List[_Datetime]

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return is_list_of(payload, datetime)

    @classmethod
    def encode_output(cls, name: str, payload: List[_Datetime], use_bytes: bool = True, **kwargs: Any) -> ResponseOutput:
        return ResponseOutput(name=name, datatype="BYTES", shape=[len(payload), 1],
                              data=[_encode(v, use_bytes) for v in payload],
                              parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> List[datetime]:
        return [_decode(v) for v in as_list(response_output.data)]

    @classmethod
    def encode_input(cls, name: str, payload: List[_Datetime], use_bytes: bool = True, **kwargs: Any) -> RequestInput:
        out = cls.encode_output(name, payload, use_bytes=use_bytes)
        return RequestInput(name=out.name, datatype=out.datatype, shape=out.shape, data=out.data,
                            parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> List[datetime]:
        return [_decode(v) for v in as_list(request_input.data)]
