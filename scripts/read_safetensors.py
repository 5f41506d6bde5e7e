#!/usr/bin/env python3
"""Reads a safetensors file by the format's specification alone (8-byte little-endian header length, JSON
header, raw little-endian bytes) with numpy, without the safetensors package, and prints one line per tensor:
`name dtype shape sha256-of-its-bytes`, then `metadata KEY VALUE` lines. tests/checkpoint_test.cpp compares
these lines with LibTorch's tensors of the same checkpoint; a user can check a file with it too.

Usage: scripts/read_safetensors.py FILE
"""
import hashlib
import json
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
          "U8": "u1", "BOOL": "?", "BF16": "<u2"}  # numpy has no bfloat16: its bits as uint16


def read(path):
    """(tensors, metadata) of a safetensors file: {name: (dtype, numpy array)} in name order, {key: value}.
    Arrays keep the file's little-endian layout; BF16 comes as its bits in uint16."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name in sorted(k for k in header if k != "__metadata__"):
        entry = header[name]
        begin, end = entry["data_offsets"]
        array = np.frombuffer(body[begin:end], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        tensors[name] = (entry["dtype"], array)
    return tensors, header.get("__metadata__", {})


def main():
    tensors, metadata = read(sys.argv[1])
    for name, (dtype, array) in tensors.items():
        print(name, dtype, "x".join(map(str, array.shape)) or "scalar", hashlib.sha256(array.tobytes()).hexdigest())
    for key, value in sorted(metadata.items()):
        print("metadata", key, value)


if __name__ == "__main__":
    main()
