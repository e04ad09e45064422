"""mlserver.codecs: MLServer's codecs, for runtimes written against
MLServer. PandasCodec needs pandas (Debian's python3-pandas) and is
imported when first asked for."""

from .base import (InputCodec, InputCodecLike, RequestCodec, RequestCodecLike, defer_request_codec,
                   find_input_codec, find_request_codec, register_input_codec, register_request_codec, registered_content_types)
from .base64 import Base64Codec
from .datetime import DatetimeCodec
from .decorator import decode_args
from .errors import CodecError, CodecNotFound
from .numpy import NumpyCodec, NumpyRequestCodec
from .string import StringCodec, StringRequestCodec
from .utils import (DecodedParameterName, decode_inference_request, decode_request_input, encode_inference_response,
                    encode_response_output, get_decoded, get_decoded_or_raw, has_decoded)

__all__ = [
    "CodecError", "CodecNotFound", "NumpyCodec", "NumpyRequestCodec", "StringCodec", "StringRequestCodec",
    "Base64Codec", "DatetimeCodec", "PandasCodec", "InputCodec", "InputCodecLike", "RequestCodec",
    "RequestCodecLike", "DecodedParameterName", "register_input_codec", "register_request_codec",
    "find_input_codec", "find_request_codec", "registered_content_types", "has_decoded", "get_decoded",
    "get_decoded_or_raw", "encode_inference_response", "encode_response_output", "decode_request_input",
    "decode_inference_request", "decode_args",
]

# PandasCodec registers itself when mlserver.codecs.pandas is imported:
# on first use of the "pd" content type, or of the PandasCodec name.
defer_request_codec("pd", __name__ + ".pandas")


def __getattr__(name: str):
    if name == "PandasCodec":
        from .pandas import PandasCodec
        globals()["PandasCodec"] = PandasCodec
        return PandasCodec
    raise AttributeError("module 'mlserver.codecs' has no attribute %r" % name)
