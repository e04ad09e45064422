"""Helpers shared by the codecs and MLModel: which codec applies to an
input (its content type, else the model's metadata for it), and where the
decoded payload is kept (``parameters._decoded_payload``)."""

from typing import Any, Callable, Dict, Iterator, List, Optional, Type, Union

from ..types import (InferenceRequest, InferenceResponse, MetadataTensor, Parameters, RequestInput,
                     RequestOutput, ResponseOutput, TensorData)
from .base import (RequestCodec, find_input_codec, find_input_codec_by_payload, find_request_codec,
                   find_request_codec_by_payload)
from .errors import CodecError

DecodedParameterName = "_decoded_payload"
DefaultOutputPrefix = "output-"
DefaultInputPrefix = "input-"

InputOrOutput = Union[RequestInput, ResponseOutput]


def inject_batch_dimension(shape: List[int]) -> List[int]:
    """A 1-D shape [N] becomes [N, 1], as MLServer's codecs write it."""
    return list(shape) if len(shape) > 1 else list(shape) + [1]


def is_list_of(payload: Any, kind: Type) -> bool:
    return isinstance(payload, list) and all(isinstance(v, kind) for v in payload)


def as_list(payload: Any) -> Iterator[Any]:
    """A tensor's data as its elements: a single bytes or str is one."""
    if isinstance(payload, TensorData):
        payload = payload.root
    if isinstance(payload, (bytes, bytearray, str)):
        yield payload
    else:
        yield from payload


def _content_type(obj: Any, metadata: Any = None) -> Optional[str]:
    if obj.parameters is not None and obj.parameters.content_type:
        return obj.parameters.content_type
    if metadata is not None and metadata.parameters is not None:
        return getattr(metadata.parameters, "content_type", None) or None
    return None


def _save_decoded(obj: Any, payload: Any) -> None:
    if obj.parameters is None:
        obj.parameters = Parameters()
    setattr(obj.parameters, DecodedParameterName, payload)


def has_decoded(obj: Any) -> bool:
    return obj.parameters is not None and DecodedParameterName in obj.parameters


def get_decoded(obj: Any) -> Any:
    return getattr(obj.parameters, DecodedParameterName) if has_decoded(obj) else None


def get_decoded_or_raw(obj: Any) -> Any:
    if has_decoded(obj):
        return get_decoded(obj)
    if isinstance(obj, (RequestInput, ResponseOutput)):
        return obj.data
    return obj


def _decode_saved(obj: Any, codec: Any, decode: Callable[[Any, Any], Any], without: Any) -> Any:
    """obj decoded by codec with decode(codec, obj), and the payload saved
    on obj; without when there is no codec."""
    if codec is None:
        return without
    decoded = decode(codec, obj)
    _save_decoded(obj, decoded)
    return decoded


def decode_request_input(request_input: RequestInput, metadata_inputs: Optional[Dict[str, MetadataTensor]] = None) -> Any:
    ct = _content_type(request_input, (metadata_inputs or {}).get(request_input.name))
    return _decode_saved(request_input, find_input_codec(ct) if ct else None,
                         lambda codec, obj: codec.decode_input(obj), None)


def decode_inference_request(request: InferenceRequest, model_settings: Any = None,
                             metadata_inputs: Optional[Dict[str, MetadataTensor]] = None) -> Any:
    for request_input in request.inputs:
        decode_request_input(request_input, metadata_inputs)
    ct = _content_type(request, model_settings)
    return _decode_saved(request, find_request_codec(ct) if ct else None,
                         lambda codec, obj: codec.decode_request(obj), request)


def encode_response_output(payload: Any, request_output: RequestOutput,
                           metadata_outputs: Optional[Dict[str, MetadataTensor]] = None) -> Optional[ResponseOutput]:
    ct = _content_type(request_output, (metadata_outputs or {}).get(request_output.name))
    codec = find_input_codec(ct) if ct else find_input_codec_by_payload(payload)
    if codec is None:
        return None
    return codec.encode_output(name=request_output.name, payload=payload)


def encode_inference_response(payload: Any, model_settings: Any) -> Optional[InferenceResponse]:
    codec = find_request_codec_by_payload(payload)
    if codec is None:
        return None
    version = model_settings.parameters.version if model_settings.parameters is not None else None
    return codec.encode_response(model_settings.name, payload, version)


class SingleInputRequestCodec(RequestCodec):
    """A request codec that is its one input's codec (NumpyRequestCodec,
    StringRequestCodec)."""

    InputCodec: Any = None

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return cls.InputCodec is not None and cls.InputCodec.can_encode(payload)

    @classmethod
    def encode_response(cls, model_name: str, payload: Any, model_version: Optional[str] = None,
                        **kwargs: Any) -> InferenceResponse:
        out = cls.InputCodec.encode_output(DefaultOutputPrefix + "1", payload, **kwargs)
        return InferenceResponse(model_name=model_name, model_version=model_version,
                                 parameters=Parameters(content_type=cls.ContentType), outputs=[out])

    @classmethod
    def decode_response(cls, response: InferenceResponse) -> Any:
        return cls._decode_only(response.outputs, "output", "response", cls.InputCodec.decode_output)

    @classmethod
    def encode_request(cls, payload: Any, **kwargs: Any) -> InferenceRequest:
        inp = cls.InputCodec.encode_input(DefaultInputPrefix + "1", payload, **kwargs)
        return InferenceRequest(inputs=[inp], parameters=Parameters(content_type=cls.ContentType))

    @classmethod
    def decode_request(cls, request: InferenceRequest) -> Any:
        return cls._decode_only(request.inputs, "input", "request", cls.InputCodec.decode_input)

    @classmethod
    def _decode_only(cls, tensors: List[Any], kind: str, whole: str, decode: Any) -> Any:
        """The payload of the one tensor of a request (response), decoded
        once by decode and kept on it."""
        if len(tensors) != 1:
            raise CodecError("the %r codec takes one %s tensor (the %s has %d)"
                             % (cls.ContentType, kind, whole, len(tensors)))
        first = tensors[0]
        if not has_decoded(first):
            _save_decoded(first, decode(first))
        return get_decoded_or_raw(first)
