"""MLServer-style custom runtimes, written as MLServer's docs and examples
write them (imports from mlserver, codecs, decode_args, predict_stream):
llmserve serves this file unchanged. See docs/API.md, "MLServer runtimes".
"""

import asyncio
from typing import AsyncIterator, List

import numpy as np
import pandas as pd

import mlserver
from mlserver import MLModel
from mlserver.codecs import NumpyCodec, PandasCodec, StringCodec, decode_args, register_input_codec
from mlserver.logging import logger
from mlserver.types import InferenceRequest, InferenceResponse, Parameters, ResponseOutput


class SumModel(MLModel):
    """Sums each row of its input; echoes the x- headers back."""

    async def load(self) -> bool:
        extra = self._settings.parameters.extra if self._settings.parameters else {}
        self.scale = float(extra.get("scale", 1.0))
        logger.info("loaded %s with scale %s", self.name, self.scale)
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        decoded = self.decode(payload.inputs[0], default_codec=NumpyCodec)
        total = decoded.sum(axis=1, keepdims=True) * self.scale
        mlserver.log(sum_rows=decoded.shape[0])

        output = NumpyCodec.encode_output(name="total", payload=total)
        response = InferenceResponse(
            id=payload.id,
            model_name=self.name,
            model_version=self.version,
            outputs=[output],
        )
        if payload.parameters and payload.parameters.headers:
            request_headers = payload.parameters.headers
            response_headers = {}
            for header_name, header_value in request_headers.items():
                if header_name.startswith("x-"):
                    response_headers[header_name] = header_value
            response.parameters = Parameters(headers=response_headers)
        return response


@register_input_codec
class ShoutCodec(StringCodec):
    """A codec of the runtime's own: strings, upper-cased."""

    ContentType = "shout"

    @classmethod
    def decode_input(cls, request_input):
        return [s.upper() for s in super().decode_input(request_input)]


class TextModel(MLModel):
    """Echoes text (decoded by its content type: str, or the runtime's own
    shout); predict_stream answers one word at a time."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        text = self.decode(payload.inputs[0], default_codec=StringCodec)[0]
        return InferenceResponse(
            model_name=self._settings.name,
            outputs=[StringCodec.encode_output(name="output", payload=[text], use_bytes=True)],
        )

    async def predict_stream(
        self, payloads: AsyncIterator[InferenceRequest]
    ) -> AsyncIterator[InferenceResponse]:
        payload = [_ async for _ in payloads][0]
        text = StringCodec.decode_input(payload.inputs[0])[0]
        words = text.split(" ")
        for i, word in enumerate(words):
            await asyncio.sleep(0)
            yield InferenceResponse(
                model_name=self._settings.name,
                outputs=[
                    StringCodec.encode_output(
                        name="output", payload=[word if i == 0 else " " + word], use_bytes=True
                    ),
                ],
            )


class TypedModel(MLModel):
    """decode_args: the inputs foo and bar as typed arguments."""

    @decode_args
    async def predict(self, foo: np.ndarray, bar: List[str]) -> np.ndarray:
        return foo.sum(axis=1, keepdims=True) + len(bar)


class TableModel(MLModel):
    """A request as a pandas DataFrame (content type pd), a DataFrame back."""

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        df = self.decode_request(payload, default_codec=PandasCodec)
        out = pd.DataFrame({"total": df.select_dtypes("number").sum(axis=1), "label": df["name"].str.upper()})
        return self.encode_response(out, default_codec=PandasCodec)


class FailingModel(MLModel):
    async def predict(self, payload: InferenceRequest) -> ResponseOutput:
        raise mlserver.errors.InferenceError("cannot infer on %d inputs" % len(payload.inputs))
