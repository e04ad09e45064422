"""The base class of a custom runtime, with MLServer's method names."""

import json
import os
from typing import Any, Optional

from .types import InferenceRequest, InferenceResponse


class Settings:
    """A model-settings.json read as attributes; a missing key is None,
    nested objects are Settings too (``settings.parameters.extra``)."""

    def __init__(self, values: Optional[dict] = None) -> None:
        self._values = dict(values or {})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        v = self._values.get(name)
        return Settings(v) if isinstance(v, dict) else v

    def dict(self) -> dict:
        return dict(self._values)

    @classmethod
    def from_env(cls) -> "Settings":
        path = os.environ.get("LLMSERVE_MODEL_SETTINGS", "")
        values: dict = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        values.setdefault("name", os.environ.get("LLMSERVE_MODEL_NAME", ""))
        return cls(values)


class LLMServeModel:
    """Subclass it and override load (optional), predict and unload
    (optional), as MLServer's MLModel:

        class MyModel(LLMServeModel):
            async def load(self):
                self.w = np.load("weights.npy")
            async def predict(self, request: InferenceRequest) -> InferenceResponse:
                x = NumpyCodec.decode_input(request.inputs[0])
                return InferenceResponse(model_name=self.name,
                                         outputs=[NumpyCodec.encode_output("y", x @ self.w)])

    ``self.settings`` is the model's model-settings.json, ``self.name`` and
    ``self.version`` its name and version. predict runs on the asyncio loop:
    await, or hand CPU-heavy work to a thread, to serve requests
    concurrently.
    """

    def __init__(self, settings: Optional[Settings] = None) -> None:
        self.settings = settings or Settings.from_env()
        self.ready = False

    @property
    def name(self) -> str:
        return self.settings.name or os.environ.get("LLMSERVE_MODEL_NAME", "")

    @property
    def version(self) -> str:
        return os.environ.get("LLMSERVE_MODEL_VERSION", "") or (self.settings.parameters.version if self.settings.parameters else None) or "1"

    async def load(self) -> None:
        """Load the model (weights, clients); the process answers that it is
        ready once this returns."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        raise NotImplementedError("predict is not implemented by %s" % type(self).__name__)

    async def predict_stream(self, payloads):
        """Answers a ModelStreamInfer call (V2 infer_stream,
        ModelStreamInfer): yields responses for the async iterator of
        requests. By default, predict's answer to the first one, as
        MLServer's."""
        yield await self.predict(await payloads.__anext__())

    async def unload(self) -> None:
        """Free what load took; called when llmserve stops the process."""
