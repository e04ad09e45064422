"""Codec base classes and the registry of content types, as MLServer's:
``@register_input_codec`` / ``@register_request_codec`` on a class with a
ContentType registers it (llmserve accepts that content type on the
model's requests without listing it in the settings: the runtime reports
its registry)."""

import importlib
from typing import Any, Dict, List, Optional, Type, Union

from ..types import InferenceRequest, InferenceResponse, RequestInput, ResponseOutput


class _Codec:
    """What input and request codecs share: the content type a codec is
    registered under, the payload type it decodes to, and whether it can
    encode a payload (none by default)."""

    ContentType: Optional[str] = None
    TypeHint: Any = None

    @classmethod
    def can_encode(cls, payload: Any) -> bool:
        return False


class InputCodec(_Codec):
    """Encodes a Python payload as one tensor and back."""

    @classmethod
    def encode_output(cls, name: str, payload: Any, **kwargs: Any) -> ResponseOutput:
        raise NotImplementedError()

    @classmethod
    def decode_output(cls, response_output: ResponseOutput) -> Any:
        raise NotImplementedError()

    @classmethod
    def encode_input(cls, name: str, payload: Any, **kwargs: Any) -> RequestInput:
        raise NotImplementedError()

    @classmethod
    def decode_input(cls, request_input: RequestInput) -> Any:
        raise NotImplementedError()

    # MLServer's older names.
    @classmethod
    def encode(cls, name: str, payload: Any, **kwargs: Any) -> ResponseOutput:
        return cls.encode_output(name, payload, **kwargs)

    @classmethod
    def decode(cls, request_input: RequestInput) -> Any:
        return cls.decode_input(request_input)

    @classmethod
    def encode_request_input(cls, name: str, payload: Any, **kwargs: Any) -> RequestInput:
        return cls.encode_input(name, payload, **kwargs)

    @classmethod
    def decode_response_output(cls, response_output: ResponseOutput) -> Any:
        return cls.decode_output(response_output)


class RequestCodec(_Codec):
    """Encodes a Python payload as a whole request (response) and back."""

    @classmethod
    def encode_response(cls, model_name: str, payload: Any, model_version: Optional[str] = None,
                        **kwargs: Any) -> InferenceResponse:
        raise NotImplementedError()

    @classmethod
    def decode_response(cls, response: InferenceResponse) -> Any:
        raise NotImplementedError()

    @classmethod
    def encode_request(cls, payload: Any, **kwargs: Any) -> InferenceRequest:
        raise NotImplementedError()

    @classmethod
    def decode_request(cls, request: InferenceRequest) -> Any:
        raise NotImplementedError()

    @classmethod
    def encode(cls, model_name: str, payload: Any, model_version: Optional[str] = None, **kwargs: Any) -> InferenceResponse:
        return cls.encode_response(model_name, payload, model_version, **kwargs)

    @classmethod
    def decode(cls, request: InferenceRequest) -> Any:
        return cls.decode_request(request)


InputCodecLike = Union[Type[InputCodec], InputCodec]
RequestCodecLike = Union[Type[RequestCodec], RequestCodec]


class _Registry:
    def __init__(self) -> None:
        self.inputs: Dict[str, InputCodecLike] = {}
        self.requests: Dict[str, RequestCodecLike] = {}
        # Request codecs whose module is imported when their content type
        # is first asked for (PandasCodec: pandas is heavy and optional).
        self.deferred: Dict[str, str] = {}

    @staticmethod
    def _find(codecs: Dict[str, Any], content_type: Optional[str], type_hint: Any) -> Any:
        if content_type is not None:
            return codecs.get(content_type)
        if type_hint is not None:
            for codec in codecs.values():
                if codec.TypeHint == type_hint:
                    return codec
        return None

    @staticmethod
    def _by_payload(codecs: Dict[str, Any], payload: Any) -> Any:
        for codec in codecs.values():
            if codec.can_encode(payload):
                return codec
        return None

    def find_input_codec(self, content_type: Optional[str] = None, type_hint: Any = None):
        return self._find(self.inputs, content_type, type_hint)

    def find_request_codec(self, content_type: Optional[str] = None, type_hint: Any = None):
        if content_type in self.deferred and content_type not in self.requests:
            importlib.import_module(self.deferred.pop(content_type))
        return self._find(self.requests, content_type, type_hint)

    def content_types(self) -> List[str]:
        return sorted(set(self.inputs) | set(self.requests) | set(self.deferred))


_registry = _Registry()


def find_input_codec(content_type: Optional[str] = None, type_hint: Any = None) -> Optional[InputCodecLike]:
    return _registry.find_input_codec(content_type, type_hint)


def find_request_codec(content_type: Optional[str] = None, type_hint: Any = None) -> Optional[RequestCodecLike]:
    return _registry.find_request_codec(content_type, type_hint)


def defer_request_codec(content_type: str, module: str) -> None:
    """Registers the request codec of content_type as one that module
    (an absolute module name) registers when it is imported, which
    find_request_codec does the first time content_type is asked for."""
    _registry.deferred[content_type] = module


def find_input_codec_by_payload(payload: Any) -> Optional[InputCodecLike]:
    return _registry._by_payload(_registry.inputs, payload)


def find_request_codec_by_payload(payload: Any) -> Optional[RequestCodecLike]:
    return _registry._by_payload(_registry.requests, payload)


def register_input_codec(codec: Any) -> Any:
    if codec.ContentType is not None:
        _registry.inputs[codec.ContentType] = codec
    return codec


def register_request_codec(codec: Any) -> Any:
    if codec.ContentType is not None:
        _registry.requests[codec.ContentType] = codec
    return codec


def registered_content_types() -> List[str]:
    """Every content type a registered codec decodes (llmserve asks the
    runtime for them)."""
    return _registry.content_types()
