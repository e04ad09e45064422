"""llmserve_runtime: write an llmserve custom runtime in Python, with
MLServer's shapes.

    from llmserve_runtime import LLMServeModel, InferenceRequest, InferenceResponse, NumpyCodec

    class MyModel(LLMServeModel):
        async def load(self): ...
        async def predict(self, request: InferenceRequest) -> InferenceResponse: ...
        async def unload(self): ...

model-settings.json names it: "implementation": "/usr/bin/python3 -m llmserve_runtime model:MyModel".
llmserve starts that command in the model's folder, and the package serves
the Open Inference Protocol's gRPC service on the socket llmserve gives it.
Needs only Debian's python3-grpcio, python3-numpy and python3-protobuf.

A runtime written for MLServer (from mlserver import MLModel) runs as it
is: the package mlserver beside this one gives it MLServer's imports, and
"implementation": "model.MyModel" (MLServer's form) runs it with this
package.
"""

from .codecs import NumpyCodec, StringCodec
from .metrics import log, register
from .model import LLMServeModel, Settings
from .types import (InferenceRequest, InferenceResponse, InvalidInput, Parameters, RequestInput,
                    RequestOutput, ResponseOutput)

__all__ = [
    "LLMServeModel", "Settings", "InferenceRequest", "InferenceResponse", "RequestInput", "RequestOutput",
    "ResponseOutput", "Parameters", "InvalidInput", "NumpyCodec", "StringCodec", "register", "log",
]
