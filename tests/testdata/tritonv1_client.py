"""A Python port of the TensorRT Inference Server v1 client's calls.

The official v1 client library (src/clients/c++/request_http.cc and
request_grpc.cc at tag v1.2.0) is C++; this port makes the same calls the
same way, with Debian's python3-protobuf and python3-grpcio:

* an InferContext first asks the server for the model's status
  (GET /api/status/<model>, gRPC Status with model_name) and takes the
  model's configuration from it: its inputs, outputs and max_batch_size;
* HTTP: the request header is the InferRequestHeader in text format in
  NV-InferRequest, the body the inputs' bytes; the answer's NV-Status is
  parsed with text_format.Parse, then NV-InferResponse, and each RAW output
  takes batch_byte_size bytes of the body, in the header's order;
* gRPC: InferRequest with meta_data and raw_input; the answer's output i
  takes raw_output(i) when it is RAW, and there must be one
  ("Expected RAW output for result ..." otherwise), as
  GrpcRequestImpl::InitResult does;
* every failure is the RequestStatus the server sent.

Usage: tritonv1_client.py DESCRIPTOR_SET HTTP_URL GRPC_ADDR < plan.json
The plan is a list of steps; the answer (stdout) is one JSON object per
step. The message classes come from DESCRIPTOR_SET (a FileDescriptorSet of
the v1 protos), so no generated code is needed.
"""
import json
import struct
import sys
import urllib.error
import urllib.request

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

PKG = "nvidia.inferenceserver."


def load_classes(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)

    def cls(name):
        desc = pool.FindMessageTypeByName(PKG + name)
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(desc)
        return message_factory.MessageFactory(pool).GetPrototype(desc)

    names = ["RequestStatus", "ServerStatus", "InferRequestHeader", "InferResponseHeader",
             "InferRequest", "InferResponse", "StatusRequest", "StatusResponse", "RequestStatusCode"]
    out = {}
    for n in names:
        if n == "RequestStatusCode":
            continue
        out[n] = cls(n)
    out["code_name"] = lambda c: pool.FindEnumTypeByName(PKG + "RequestStatusCode").values_by_number[c].name
    return out


class ClientError(Exception):
    """An error as the client library reports it: a RequestStatus."""

    def __init__(self, status):
        super().__init__(status.msg)
        self.status = status


class HttpContext:
    def __init__(self, m, url, model):
        self.m, self.url, self.model = m, url, model
        self.config = self.status(model).model_status[model].config

    def status(self, model=""):
        path = "/api/status" + ("/" + model if model else "")
        with self._open(urllib.request.Request(self.url + path)) as (rs, body):
            st = self.m["ServerStatus"]()
            text_format.Parse(body.decode("ascii"), st)
            return st

    def _open(self, req):
        ctx = self

        class _Ctx:
            def __enter__(self):
                try:
                    resp = urllib.request.urlopen(req)
                    code, headers, body = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    code, headers, body = e.code, e.headers, e.read()
                rs = ctx.m["RequestStatus"]()
                # The v1 client parses NV-Status with TextFormat.
                text_format.Parse(headers["NV-Status"], rs)
                if rs.code != 1:  # SUCCESS
                    raise ClientError(rs)
                self.headers = headers
                ctx.last_headers = headers
                return rs, body

            def __exit__(self, *a):
                return False

        return _Ctx()

    def run(self, header, inputs):
        hdr = self.m["InferRequestHeader"]()
        text_format.Parse(header, hdr)
        check_batch(self.config, hdr)
        req = urllib.request.Request(self.url + "/api/infer/" + self.model, data=b"".join(inputs), method="POST")
        req.add_header("NV-InferRequest", text_format.MessageToString(hdr, as_one_line=True))
        with self._open(req) as (rs, body):
            resp = self.m["InferResponseHeader"]()
            text_format.Parse(self.last_headers["NV-InferResponse"], resp)
            results, off = {}, 0
            for out in resp.output:
                if out.HasField("raw"):
                    n = out.raw.batch_byte_size
                    results[out.name] = body[off:off + n]
                    off += n
                else:
                    results[out.name] = classes(out)
            return resp, results


class GrpcContext:
    def __init__(self, m, addr, model):
        self.m, self.model = m, model
        self.channel = grpc.insecure_channel(addr)
        self.status_rpc = self.channel.unary_unary(
            "/" + PKG + "GRPCService/Status",
            request_serializer=lambda r: r.SerializeToString(),
            response_deserializer=m["StatusResponse"].FromString)
        self.infer_rpc = self.channel.unary_unary(
            "/" + PKG + "GRPCService/Infer",
            request_serializer=lambda r: r.SerializeToString(),
            response_deserializer=m["InferResponse"].FromString)
        self.stream_rpc = self.channel.stream_stream(
            "/" + PKG + "GRPCService/StreamInfer",
            request_serializer=lambda r: r.SerializeToString(),
            response_deserializer=m["InferResponse"].FromString)
        self.config = self.status(model).model_status[model].config

    def status(self, model=""):
        resp = self.status_rpc(self.m["StatusRequest"](model_name=model))
        if resp.request_status.code != 1:
            raise ClientError(resp.request_status)
        return resp.server_status

    def request(self, header, inputs, model=None):
        req = self.m["InferRequest"](model_name=model or self.model, model_version=-1)
        text_format.Parse(header, req.meta_data)
        check_batch(self.config, req.meta_data)
        req.raw_input.extend(inputs)
        return req

    def run(self, header, inputs, model=None):
        return self.results(self.infer_rpc(self.request(header, inputs, model)))

    def stream(self, reqs):
        return [self.results(r) for r in self.stream_rpc(iter([self.request(h, i) for h, i in reqs]))]

    def results(self, resp):
        # GrpcRequestImpl::GetResults and InitResult.
        if resp.request_status.code != 1:
            raise ClientError(resp.request_status)
        results = {}
        for idx, out in enumerate(resp.meta_data.output):
            if out.HasField("raw"):
                if len(resp.raw_output) <= idx:
                    raise RuntimeError("Expected RAW output for result '%s'" % out.name)
                data = resp.raw_output[idx]
                if len(data) != out.raw.batch_byte_size:
                    raise RuntimeError("Written bytes doesn't match received bytes for result '%s'" % out.name)
                results[out.name] = data
            else:
                results[out.name] = classes(out)
        return resp.meta_data, results


def check_batch(config, hdr):
    # InferContextImpl::SetRunOptions: the batch size must fit the model.
    if config.max_batch_size > 0 and hdr.batch_size > config.max_batch_size:
        raise RuntimeError("batch size %d exceeds the model's max_batch_size %d" % (hdr.batch_size, config.max_batch_size))
    if config.max_batch_size == 0 and hdr.batch_size != 1:
        raise RuntimeError("the model does not batch: batch size must be 1")


def classes(out):
    return [[[c.idx, c.value, c.label] for c in b.cls] for b in out.batch_classes]


def encode(kind, values):
    if kind == "fp32":
        return struct.pack("<%df" % len(values), *values)
    if kind == "int32":
        return struct.pack("<%di" % len(values), *values)
    if kind == "string":
        return b"".join(struct.pack("<I", len(v.encode())) + v.encode() for v in values)
    raise ValueError(kind)


def decode(kind, data):
    if kind == "fp32":
        return list(struct.unpack("<%df" % (len(data) // 4), data))
    if kind == "int64":
        return list(struct.unpack("<%dq" % (len(data) // 8), data))
    if kind == "string":
        out, off = [], 0
        while off < len(data):
            (n,) = struct.unpack_from("<I", data, off)
            out.append(data[off + 4:off + 4 + n].decode())
            off += 4 + n
        return out
    raise ValueError(kind)


def step(m, http_url, grpc_addr, s):
    ctx = None
    try:
        if s["op"] == "status":
            ctx = HttpContext(m, http_url, s["model"])
            st = ctx.status()
            return {"models": {name: {str(v): text_format.MessageToString(vs, as_one_line=True)
                                      for v, vs in ms.version_status.items()}
                               for name, ms in st.model_status.items()},
                    "max_batch_size": ctx.config.max_batch_size}
        if s["op"] == "status_of":
            h = HttpContext.__new__(HttpContext)
            h.m, h.url = m, http_url
            st = h.status(s["model"])
            rs = m["RequestStatus"]()
            text_format.Parse(h.last_headers["NV-Status"], rs)
            g = GrpcContext.__new__(GrpcContext)
            g.m = m
            g.channel = grpc.insecure_channel(grpc_addr)
            resp = g.channel.unary_unary("/" + PKG + "GRPCService/Status",
                                         request_serializer=lambda r: r.SerializeToString(),
                                         response_deserializer=m["StatusResponse"].FromString)(m["StatusRequest"](model_name=s["model"]))
            return {"http_msg": rs.msg, "grpc_msg": resp.request_status.msg,
                    "states": [text_format.MessageToString(vs, as_one_line=True) for vs in st.model_status[s["model"]].version_status.values()]}
        inputs = [encode(k, v) for k, v in s["inputs"]]
        if s["op"] == "stream":
            ctx = GrpcContext(m, grpc_addr, s["model"])
            answers = ctx.stream([(s["header"], inputs)] * s["times"])
            return {"answers": [{n: (decode(s["kinds"][n], v) if isinstance(v, bytes) else v) for n, v in r.items()} for _, r in answers]}
        if s["op"] == "http":
            ctx = HttpContext(m, http_url, s["model"])
        else:
            ctx = GrpcContext(m, grpc_addr, s["model"])
        hdr, results = ctx.run(s["header"], inputs)
        return {"batch_size": hdr.batch_size, "outputs": [o.name for o in hdr.output],
                "results": {n: (decode(s["kinds"][n], v) if isinstance(v, bytes) else v) for n, v in results.items()}}
    except ClientError as e:
        return {"error": {"code": m["code_name"](e.status.code), "msg": e.status.msg}}


def main():
    m = load_classes(sys.argv[1])
    for s in json.load(sys.stdin):
        print(json.dumps(step(m, sys.argv[2], sys.argv[3], s)))


if __name__ == "__main__":
    main()
