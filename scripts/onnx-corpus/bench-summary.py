#!/usr/bin/env python3
"""Summarizes scripts/bench-onnx.sh's JSON reports in OUT: for each model
and load, the median over the reps of each server's requests/s, p50 and p99
(ms), and llmserve's requests/s over ONNX Runtime's (REST and gRPC both
against ORT's REST), as a Markdown table.

usage: bench-summary.py OUT
"""
import glob
import json
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    runs = {}  # (server, model, tag) -> [report]
    for path in glob.glob(os.path.join(sys.argv[1], "*-rep*.json")):
        m = re.match(r"(llmserve-grpc|llmserve|ort)-(.+)-(c\d+|r\d+)-rep\d+\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs.setdefault(m.groups(), []).append(json.load(f))

    def med(server, model, tag, key):
        r = runs.get((server, model, tag))
        return statistics.median(x[key] for x in r) if r else None

    def load(tag):
        return f"c={tag[1:]}" if tag[0] == "c" else f"{tag[1:]} rows, c=1"

    keys = sorted({(m, t) for _, m, t in runs}, key=lambda k: (k[0], k[1][0], int(k[1][1:])))
    print("| model | load | protocol | llmserve req/s | ORT req/s | llmserve / ORT | llmserve p50 | ORT p50 | llmserve p99 | ORT p99 | reps |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model, tag in keys:
        ort = med("ort", model, tag, "request_throughput")
        for server, proto in (("llmserve", "REST"), ("llmserve-grpc", "gRPC")):
            ours = med(server, model, tag, "request_throughput")
            if ours is None:
                continue
            ratio = f"{ours / ort:.2f}×" if ort else "–"
            cells = [model, load(tag), proto, f"{ours:.0f}", f"{ort:.0f}" if ort else "–", ratio]
            for key in ("median_e2el_ms", "p99_e2el_ms"):
                cells += [f"{med(server, model, tag, key):.2f}", f"{med('ort', model, tag, key):.2f}" if ort else "–"]
            cells.append(str(len(runs[(server, model, tag)])))
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
