"""mlserver.logging: the "mlserver" logger, which llmserve_runtime's
logging setup sends to stderr (llmserve logs each line with the model's
name)."""

import logging as _logging

logger = _logging.getLogger("mlserver")

__all__ = ["logger"]
