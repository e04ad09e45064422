"""mlserver.MLModel: MLServer's base class of a custom runtime, served by
llmserve_runtime (it is an LLMServeModel)."""

from typing import Any, AsyncIterator, Dict, List, Optional

from llmserve_runtime.model import LLMServeModel

from . import types as _types
from .codecs.errors import CodecNotFound
from .codecs.utils import (decode_inference_request, decode_request_input, encode_inference_response,
                           encode_response_output, get_decoded, has_decoded)
from .settings import ModelSettings
from .types import (InferenceRequest, InferenceResponse, MetadataModelResponse, MetadataTensor, RequestInput,
                    RequestOutput, ResponseOutput)


def _index(tensors: Optional[List[MetadataTensor]]) -> Dict[str, MetadataTensor]:
    return {t.name: t for t in (tensors or [])}


def _metadata_property(field: str) -> property:
    """The settings' inputs or outputs (field) as a property of the model:
    setting it also indexes them by name (self._inputs_index or
    self._outputs_index) for the codecs."""

    def get(self: "MLModel") -> Optional[List[MetadataTensor]]:
        return getattr(self._settings, field)

    def set_(self: "MLModel", value: List[MetadataTensor]) -> None:
        setattr(self._settings, field, value)
        setattr(self, "_%s_index" % field, _index(value))

    return property(get, set_)


class MLModel(LLMServeModel):
    """Subclass it as in MLServer: load, predict (and predict_stream),
    unload; self.decode / self.encode / self.decode_request /
    self.encode_response use the codecs; self.settings (also
    self._settings) is the model-settings.json as a ModelSettings."""

    # The request and response types the server builds for this class.
    _wire_types = _types

    def __init__(self, settings: Optional[ModelSettings] = None) -> None:
        if settings is None:
            settings = ModelSettings.from_env()
        elif isinstance(settings, dict):
            settings = ModelSettings(**settings)
        self._settings = settings
        self._inputs_index = _index(settings.inputs)
        self._outputs_index = _index(settings.outputs)
        self.ready = False

    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        raise NotImplementedError("predict() method not implemented")

    async def predict_stream(self, payloads: AsyncIterator[InferenceRequest]) -> AsyncIterator[InferenceResponse]:
        yield await self.predict(await payloads.__anext__())

    async def unload(self) -> bool:
        return True

    async def metadata(self) -> MetadataModelResponse:
        s = self._settings
        return MetadataModelResponse(name=self.name, platform=s.platform, versions=s.versions,
                                     inputs=s.inputs, outputs=s.outputs,
                                     parameters={"content_type": s.parameters.content_type}
                                     if s.parameters is not None and s.parameters.content_type else None)

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def version(self) -> Optional[str]:
        return self._settings.version

    @property
    def settings(self) -> ModelSettings:
        return self._settings

    inputs = _metadata_property("inputs")
    outputs = _metadata_property("outputs")

    def decode(self, request_input: RequestInput, default_codec: Any = None) -> Any:
        """The input decoded by its content type (the request's, else the
        model's metadata for it), else by default_codec, else its data."""
        decode_request_input(request_input, self._inputs_index)
        if has_decoded(request_input):
            return get_decoded(request_input)
        if default_codec is not None:
            return default_codec.decode_input(request_input)
        return request_input.data

    def decode_request(self, inference_request: InferenceRequest, default_codec: Any = None) -> Any:
        decode_inference_request(inference_request, self._settings, self._inputs_index)
        if has_decoded(inference_request):
            return get_decoded(inference_request)
        if default_codec is not None:
            return default_codec.decode_request(inference_request)
        return inference_request

    def encode_response(self, payload: Any, default_codec: Any = None) -> InferenceResponse:
        response = encode_inference_response(payload, self._settings)
        if response is not None:
            return response
        if default_codec is not None:
            return default_codec.encode_response(self.name, payload, self.version)
        raise CodecNotFound(payload_type=str(type(payload)), is_input=False, is_request=True)

    def encode(self, payload: Any, request_output: RequestOutput, default_codec: Any = None) -> ResponseOutput:
        out = encode_response_output(payload, request_output, self._outputs_index)
        if out is not None:
            return out
        if default_codec is not None:
            return default_codec.encode_output(request_output.name, payload)
        raise CodecNotFound(name=request_output.name, payload_type=str(type(payload)), is_input=False)
