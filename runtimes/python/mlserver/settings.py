"""mlserver.settings: a model's model-settings.json as MLServer's
ModelSettings and ModelParameters (``settings.parameters.extra`` is a
dict), and the server-wide Settings (its defaults only: llmserve's own
flags configure the server)."""

import json
import os
from typing import Any, Dict, Optional

from .types import MetadataTensor


class _Fields:
    """Known fields with defaults; other keys of the file are kept as
    attributes too (MLServer allows extra keys); a key that is absent is an
    AttributeError, so ``getattr(settings.parameters, "x", default)`` works."""

    _defaults: Dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        for k, v in self._defaults.items():
            setattr(self, k, v() if callable(v) else v)
        for k, v in values.items():
            setattr(self, k, v)

    def dict(self, exclude_none: bool = False, **kwargs: Any) -> Dict[str, Any]:
        out = {}
        for k, v in vars(self).items():
            if k.startswith("_") or (exclude_none and v is None):
                continue
            if isinstance(v, _Fields) or isinstance(v, MetadataTensor):
                v = v.dict()
            elif isinstance(v, list):
                v = [x.dict() if isinstance(x, MetadataTensor) else x for x in v]
            out[k] = v
        return out

    model_dump = dict

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in self.dict().items()))


class ModelParameters(_Fields):
    _defaults = {"uri": None, "version": None, "environment_path": None, "environment_tarball": None,
                 "format": None, "content_type": None, "extra": dict}

    def __init__(self, **values: Any) -> None:
        super().__init__(**values)
        if self.extra is None:
            self.extra = {}


class ModelSettings(_Fields):
    """A model-settings.json. ``implementation_`` is the implementation as
    the file writes it; ``version`` is ``parameters.version``."""

    _defaults = {"name": "", "platform": "", "versions": list, "inputs": list, "outputs": list,
                 "parallel_workers": None, "warm_workers": False, "max_batch_size": 0, "max_batch_time": 0.0,
                 "parameters": None, "cache_enabled": False, "implementation_": None}

    def __init__(self, **values: Any) -> None:
        if "implementation" in values:
            values["implementation_"] = values.pop("implementation")
        params = values.get("parameters")
        if isinstance(params, dict):
            values["parameters"] = ModelParameters(**params)
        for key in ("inputs", "outputs"):
            values[key] = [t if isinstance(t, MetadataTensor) else MetadataTensor.parse_obj(t)
                           for t in (values.get(key) or [])]
        super().__init__(**values)

    @property
    def version(self) -> Optional[str]:
        return self.parameters.version if self.parameters is not None else None

    @property
    def implementation(self) -> Optional[str]:
        return self.implementation_

    def dict(self, exclude_none: bool = False, **kwargs: Any) -> Dict[str, Any]:
        out = super().dict(exclude_none=exclude_none)
        impl = out.pop("implementation_", None)
        if impl is not None or not exclude_none:
            out["implementation"] = impl
        return out

    model_dump = dict

    @classmethod
    def parse_file(cls, path: str) -> "ModelSettings":
        with open(path, encoding="utf-8") as f:
            return cls(**json.load(f))

    @classmethod
    def parse_obj(cls, obj: Dict[str, Any]) -> "ModelSettings":
        return cls(**obj)

    model_validate = parse_obj

    @classmethod
    def from_env(cls) -> "ModelSettings":
        """The settings llmserve runs the process with: the file in
        LLMSERVE_MODEL_SETTINGS, its name and version as llmserve serves
        the model (LLMSERVE_MODEL_NAME, LLMSERVE_MODEL_VERSION)."""
        path = os.environ.get("LLMSERVE_MODEL_SETTINGS", "")
        values: Dict[str, Any] = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        if os.environ.get("LLMSERVE_MODEL_NAME"):
            values["name"] = os.environ["LLMSERVE_MODEL_NAME"]
        version = os.environ.get("LLMSERVE_MODEL_VERSION")
        if version:
            params = dict(values.get("parameters") or {})
            params["version"] = version
            values["parameters"] = params
        return cls(**values)


class Settings(_Fields):
    """MLServer's server settings, with its defaults; llmserve's flags are
    what configure the server, so these are for reading only."""

    _defaults = {"debug": False, "parallel_workers": 1, "model_repository_root": ".", "load_models_at_startup": True,
                 "server_name": "mlserver", "server_version": "llmserve", "extensions": list,
                 "host": "0.0.0.0", "http_port": 8080, "grpc_port": 8081, "metrics_port": 8082,
                 "metrics_endpoint": "/metrics", "cache_enabled": False}


__all__ = ["ModelSettings", "ModelParameters", "Settings"]
