"""A runtime's own metrics, as MLServer's mlserver.register / mlserver.log.

``register(name, description)`` declares a metric (a histogram by
default, as MLServer's; or kind="counter" / "gauge"); ``log(name=value)``
records values (a counter adds, a gauge sets, a histogram observes); a
name never registered is registered then, as a histogram, as MLServer's
log does.
llmserve reads them at every scrape of its /metrics, through the
llmserve.runtime.v1.RuntimeMetrics service, and adds the model's labels.
"""

import math
import re
import threading
from typing import Dict, List, Optional, Sequence

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class _Metric:
    def __init__(self, name: str, description: str, kind: str, buckets: Sequence[float]) -> None:
        self.name, self.description, self.kind = name, description, kind
        self.value = 0.0
        self.buckets = sorted(buckets)
        self.counts = [0] * len(self.buckets)
        self.count, self.sum = 0, 0.0

    def record(self, v: float) -> None:
        if self.kind == "counter":
            if v < 0:
                raise ValueError("counter %s cannot decrease (got %r)" % (self.name, v))
            self.value += v
        elif self.kind == "gauge":
            self.value = v
        else:
            self.count += 1
            self.sum += v
            for i, b in enumerate(self.buckets):
                if v <= b:
                    self.counts[i] += 1

    def text(self) -> List[str]:
        help_ = self.description.replace("\\", "\\\\").replace("\n", "\\n")
        lines = ["# HELP %s %s" % (self.name, help_), "# TYPE %s %s" % (self.name, self.kind)]
        if self.kind != "histogram":
            lines.append("%s %s" % (self.name, _num(self.value)))
            return lines
        for b, c in zip(self.buckets, self.counts):
            lines.append('%s_bucket{le="%s"} %d' % (self.name, _num(b), c))
        lines.append('%s_bucket{le="+Inf"} %d' % (self.name, self.count))
        lines.append("%s_sum %s" % (self.name, _num(self.sum)))
        lines.append("%s_count %d" % (self.name, self.count))
        return lines


def _num(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metrics: Dict[str, _Metric] = {}

    def register(self, name: str, description: str, kind: str = "histogram",
                 buckets: Optional[Sequence[float]] = None) -> None:
        if not _NAME.match(name):
            raise ValueError("metric name %r is not a Prometheus name" % name)
        if kind not in ("counter", "gauge", "histogram"):
            raise ValueError("kind %r is not counter, gauge or histogram" % kind)
        with self._lock:
            if name in self._metrics:
                return
            self._metrics[name] = _Metric(name, description, kind, buckets or DEFAULT_BUCKETS)

    def log(self, **values: float) -> None:
        with self._lock:
            for name, v in values.items():
                m = self._metrics.get(name)
                if m is None:  # as MLServer's log: registered on the fly, as a histogram
                    if not _NAME.match(name):
                        raise ValueError("metric name %r is not a Prometheus name" % name)
                    m = self._metrics[name] = _Metric(name, name, "histogram", DEFAULT_BUCKETS)
                m.record(float(v))

    def text(self) -> str:
        with self._lock:
            lines: List[str] = []
            for m in self._metrics.values():
                lines.extend(m.text())
        return "\n".join(lines) + ("\n" if lines else "")


REGISTRY = Registry()
register = REGISTRY.register
log = REGISTRY.log
