"""Parses text-format protobuf messages with Python's reference parser.

Usage: textparse.py DESCRIPTOR_SET MESSAGE_NAME < lines
Each stdin line is a JSON string holding one text message; each stdout line
is the parsed message, serialized (binary, deterministic) in hex, or
"error: ..." when text_format.Parse refuses it. The message classes come
from DESCRIPTOR_SET, a serialized FileDescriptorSet, so that no generated
Python code is needed.
"""
import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format


def message_class(pool, name):
    desc = pool.FindMessageTypeByName(name)
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def main():
    fds = descriptor_pb2.FileDescriptorSet()
    with open(sys.argv[1], "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    cls = message_class(pool, sys.argv[2])
    for line in sys.stdin:
        text = json.loads(line)
        m = cls()
        try:
            text_format.Parse(text, m)
        except text_format.ParseError as e:
            print("error: %s" % e)
            continue
        print(m.SerializeToString(deterministic=True).hex())


if __name__ == "__main__":
    main()
