"""python3 -m llmserve_runtime MODULE:CLASS [--socket PATH | --address HOST:PORT]

Imports CLASS (a LLMServeModel) from MODULE, found from the current folder
(llmserve runs the command in the model's folder), and serves it. MLServer's
"module.Class" form works too."""

import argparse
import asyncio
import importlib
import logging
import os
import sys

from .model import LLMServeModel
from .server import address_from_env, serve


def load_class(spec: str):
    module, sep, name = spec.partition(":")
    if not sep:
        module, _, name = spec.rpartition(".")
    if not module or not name:
        raise SystemExit("%r is not MODULE:CLASS (or MODULE.CLASS)" % spec)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, LLMServeModel)):
        raise SystemExit("%s is not a subclass of llmserve_runtime.LLMServeModel" % spec)
    return cls


def instantiate(cls):
    """An instance of the model class: an MLServer MLModel gets its
    ModelSettings as MLServer passes them (its __init__ may require them),
    an LLMServeModel reads its settings itself."""
    if getattr(cls, "_wire_types", None) is not None:
        from mlserver.settings import ModelSettings
        return cls(ModelSettings.from_env())
    return cls()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python3 -m llmserve_runtime", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="MODULE:CLASS of the LLMServeModel subclass")
    ap.add_argument("--socket", help="Unix socket path (default: $LLMSERVE_RUNTIME_SOCKET)")
    ap.add_argument("--address", help="serve on HOST:PORT instead of a Unix socket (for testing by hand)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    model = instantiate(load_class(args.model))
    asyncio.run(serve(model, args.address or address_from_env(args.socket)))


if __name__ == "__main__":
    main()
