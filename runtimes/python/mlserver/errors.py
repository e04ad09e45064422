"""mlserver.errors: MLServer's exceptions. Raised from predict, one with
status_code 400 (InvalidInput, a codec's error) reaches the client as a
400 / INVALID_ARGUMENT with its message; any other as a 500."""

from llmserve_runtime.types import InvalidInput as _InvalidInput


class MLServerError(Exception):
    def __init__(self, msg: str, status_code: int = 500) -> None:
        super().__init__(msg)
        self.status_code = status_code


class InferenceError(MLServerError):
    def __init__(self, msg: str) -> None:
        super().__init__(msg, status_code=400)


class ModelNotFound(MLServerError):
    def __init__(self, name: str, version: str = None) -> None:
        msg = "Model %s not found" % name if version is None else "Model %s with version %s not found" % (name, version)
        super().__init__(msg, status_code=404)


class ModelNotReady(MLServerError):
    def __init__(self, name: str, version: str = None) -> None:
        super().__init__("Model %s is not ready yet." % name, status_code=400)


class InvalidModelURI(MLServerError):
    def __init__(self, name: str, uri: str = None) -> None:
        super().__init__("Invalid URI specified for model %s (%s)" % (name, uri), status_code=422)


class InvalidInput(MLServerError, _InvalidInput):
    """llmserve_runtime's InvalidInput as an MLServerError (status 400)."""

    def __init__(self, msg: str) -> None:
        MLServerError.__init__(self, msg, status_code=400)


__all__ = ["MLServerError", "InferenceError", "ModelNotFound", "ModelNotReady", "InvalidModelURI", "InvalidInput"]
