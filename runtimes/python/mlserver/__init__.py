"""mlserver: MLServer's import surface for custom runtimes run by llmserve.

A runtime written for MLServer runs unchanged:

    from mlserver import MLModel
    from mlserver.codecs import NumpyCodec, decode_args
    from mlserver.types import InferenceRequest, InferenceResponse

    class MyModel(MLModel):
        async def load(self) -> bool: ...
        async def predict(self, payload: InferenceRequest) -> InferenceResponse: ...

with model-settings.json's "implementation": "model.MyModel" (MLServer's
form): llmserve runs it with python3 -m llmserve_runtime model.MyModel.
This package lives beside llmserve_runtime (runtimes/python) and is not
MLServer: it is llmserve's own code with MLServer's names, on Debian's
python3-numpy, python3-grpcio, python3-protobuf (python3-pandas for
PandasCodec). docs/API.md lists what is and is not supported.
"""

from llmserve_runtime.metrics import log, register

from . import codecs, errors, settings, types
from .model import MLModel
from .settings import ModelSettings, Settings

__version__ = "1.6.0+llmserve"

__all__ = ["MLModel", "ModelSettings", "Settings", "types", "codecs", "settings", "errors", "register", "log"]
