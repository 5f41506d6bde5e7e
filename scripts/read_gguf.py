#!/usr/bin/env python3
"""Reads a GGUF v3 file by the format's specification alone (llama.cpp's gguf.md: magic, version, counts,
typed key/values, tensor infos with dimensions innermost first, 32-byte aligned data) with numpy, and checks
an lmtrain export against the checkpoint it came from. tests/gguf_test.cpp runs it; a user can too.

Usage:
  scripts/read_gguf.py FILE                       print the metadata (arrays summarised) and one line per tensor
  scripts/read_gguf.py --check FILE CHECKPOINT    check FILE against CHECKPOINT/model.safetensors: the format
      (magic, version 3, each key's type, alignment, offsets), every tensor's name and shape, f32 bytes equal to
      the checkpoint's, f16 equal to its rounding, q8_0 blocks within the format's error; exit 1 on a failure
"""
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_safetensors  # noqa: E402

VALUE_TYPES = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool", 8: "string",
               9: "array", 10: "u64", 11: "i64", 12: "f64"}
SCALARS = {"u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i", "f32": "<f", "bool": "<?",
           "u64": "<Q", "i64": "<q", "f64": "<d"}
TENSOR_TYPES = {0: "f32", 1: "f16", 8: "q8_0"}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.at:self.at + n].decode("utf-8")
        self.at += n
        return s

    def value(self, type_name):
        if type_name == "string":
            return self.string()
        if type_name == "array":
            inner, n = VALUE_TYPES[self.take("<I")], self.take("<Q")
            return (inner, [self.value(inner) for _ in range(n)])
        return self.take(SCALARS[type_name])


def read(path):
    """{'version', 'metadata': {key: (type, value)} (arrays as (type, (element type, list))), 'tensors':
    [{name, shape (outermost first), type, offset}], 'data_start', 'bytes'}."""
    data = open(path, "rb").read()
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: expected the magic GGUF, got {data[:4]!r}")
    r = Reader(data)
    r.at = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        t = VALUE_TYPES[r.take("<I")]
        metadata[key] = (t, r.value(t))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        tensors.append({"name": name, "shape": dims[::-1], "type": TENSOR_TYPES[r.take("<I")], "offset": r.take("<Q")})
    alignment = metadata.get("general.alignment", ("u32", 32))[1]
    start = (r.at + alignment - 1) // alignment * alignment
    return {"version": version, "metadata": metadata, "tensors": tensors, "data_start": start, "bytes": data,
            "alignment": alignment}


def tensor_bytes(g, t):
    n = int(np.prod(t["shape"]))
    size = {"f32": 4 * n, "f16": 2 * n, "q8_0": n // 32 * 34}[t["type"]]
    begin = g["data_start"] + t["offset"]
    return g["bytes"][begin:begin + size]


def q8_0_blocks(raw):
    """(scales float32 (blocks,), values int8 (blocks, 32)) of q8_0 bytes."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("q", "i1", 32)]))
    return blocks["d"].astype(np.float32), blocks["q"].astype(np.float32)


def tensor(g, t):
    """A tensor as float32 numpy in LibTorch's order, dequantised."""
    raw = tensor_bytes(g, t)
    if t["type"] == "f32":
        return np.frombuffer(raw, dtype="<f4").reshape(t["shape"])
    if t["type"] == "f16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(t["shape"])
    d, q = q8_0_blocks(raw)
    return (q * d[:, None]).reshape(t["shape"])


def expected_weights(g, ckpt):
    """{gguf name: float32 numpy} from the checkpoint, by lmtrain's names (written out here, independently of
    the C++ table), with sqrt(C) folded into an untied table and the sinusoid for sinusoidal positions."""
    import json
    tensors, _ = read_safetensors.read(os.path.join(ckpt, "model.safetensors"))
    w = {name: array.astype(np.float32) for name, (_, array) in tensors.items()}
    arch = json.load(open(os.path.join(ckpt, "arch.json")))
    C, T = arch["d_model"], arch["max_seq_len"]
    out = {"token_embd.weight": w["tok_emb.weight"], "output_norm.weight": w["ln_f.weight"],
           "output_norm.bias": w["ln_f.bias"]}
    if arch.get("embedding_scale") == "sqrt_d":
        out["token_embd.weight"] = w["tok_emb.weight"] * np.float32(math.sqrt(C))
    if "pos_emb.weight" in w:
        out["position_embd.weight"] = w["pos_emb.weight"]
    else:  # sinusoidal: sin at even dimensions, cos at odd, frequency 10000^(-2i/C)
        angle = np.arange(T, dtype=np.float64)[:, None] * 10000.0 ** (-np.arange(0, C, 2, dtype=np.float64) / C)
        pe = np.empty((T, C))
        pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
        out["position_embd.weight"] = pe.astype(np.float32)
    if "head.weight" in w:
        out["output.weight"] = w["head.weight"]
    for i in range(arch["n_layers"]):
        for mine, theirs in [("ln1", "attn_norm"), ("attn.qkv", "attn_qkv"), ("attn.proj", "attn_output"),
                             ("ln2", "ffn_norm"), ("mlp.fc", "ffn_up"), ("mlp.proj", "ffn_down")]:
            for p in ("weight", "bias"):
                out[f"blk.{i}.{theirs}.{p}"] = w[f"blocks.{i}.{mine}.{p}"]
    return out, arch


KEY_TYPES = {"general.architecture": "string", "general.name": "string", "general.file_type": "u32",
             "gpt2.context_length": "u32", "gpt2.embedding_length": "u32", "gpt2.feed_forward_length": "u32",
             "gpt2.block_count": "u32", "gpt2.attention.head_count": "u32",
             "gpt2.attention.layer_norm_epsilon": "f32", "tokenizer.ggml.model": "string",
             "tokenizer.ggml.tokens": "array", "tokenizer.ggml.scores": "array", "tokenizer.ggml.token_type": "array",
             "tokenizer.ggml.bos_token_id": "u32", "tokenizer.ggml.eos_token_id": "u32",
             "tokenizer.ggml.add_bos_token": "bool", "tokenizer.ggml.add_space_prefix": "bool"}


def check(path, ckpt):
    g = read(path)
    problems = []
    def expect(ok, what):
        if not ok:
            problems.append(what)
    expect(g["version"] == 3, f"version {g['version']}, expected 3")
    md = g["metadata"]
    for key, t in KEY_TYPES.items():
        expect(key in md and md[key][0] == t, f"{key}: expected type {t}, got {md.get(key, ('missing',))[0]}")
    for key, inner in (("tokenizer.ggml.tokens", "string"), ("tokenizer.ggml.scores", "f32"),
                       ("tokenizer.ggml.token_type", "i32")):
        expect(key in md and md[key][1][0] == inner, f"{key}: expected an array of {inner}")
    expect(g["data_start"] % 32 == 0 and g["alignment"] == 32, "data section not 32-byte aligned")
    want, arch = expected_weights(g, ckpt)
    expect(md["gpt2.context_length"][1] == arch["max_seq_len"], "gpt2.context_length != max_seq_len")
    expect(len(md["tokenizer.ggml.tokens"][1][1]) == arch["vocab_size"], "token count != vocab_size")
    names = [t["name"] for t in g["tensors"]]
    expect(sorted(names) == sorted(want), f"tensors {sorted(set(names) ^ set(want))} differ from the checkpoint's")
    worst = 0.0
    for t in g["tensors"]:
        expect(t["offset"] % 32 == 0, f"{t['name']}: offset {t['offset']} not 32-byte aligned")
        w = want.get(t["name"])
        if w is None:
            continue
        expect(list(w.shape) == t["shape"], f"{t['name']}: shape {t['shape']}, checkpoint {list(w.shape)}")
        if t["type"] == "f32":
            expect(tensor_bytes(g, t) == w.astype("<f4").tobytes(), f"{t['name']}: f32 bytes differ")
        elif t["type"] == "f16":
            expect(tensor_bytes(g, t) == w.astype("<f2").tobytes(), f"{t['name']}: f16 is not the rounding")
        else:  # |x - q d| <= d/2 with the f32 scale; the f16 scale adds at most 127 |d - d16|, where |d - d16|
            # <= d 2^-11 for a normal f16 and <= 2^-25 (half the spacing 2^-24) for a subnormal one
            d, q = q8_0_blocks(tensor_bytes(g, t))
            x = w.reshape(-1, 32)
            d32 = np.abs(x).max(axis=1) / 127
            bound = d32 / 2 + 127 * np.maximum(d32 * 2.0 ** -11, 2.0 ** -25) + 1e-12
            err = np.abs(x - q * d[:, None]).max(axis=1)
            worst = max(worst, float((err / bound).max()))
            expect(bool((err <= bound).all()), f"{t['name']}: q8_0 error above the format's bound")
    for p in problems:
        print("FAIL", p)
    print(f"{path}: {len(g['tensors'])} tensors, {len(md)} keys, "
          f"{'q8_0 worst error / bound %.3f, ' % worst if worst else ''}{'ok' if not problems else 'FAILED'}")
    return 0 if not problems else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--check":
        return check(sys.argv[2], sys.argv[3])
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    g = read(sys.argv[1])
    for key, (t, v) in g["metadata"].items():
        shown = f"[{v[0]} x {len(v[1])}] {v[1][:5]}..." if t == "array" else repr(v)
        print(f"{key} ({t}) = {shown}")
    for t in g["tensors"]:
        print(f"{t['name']} {t['type']} {t['shape']} offset {t['offset']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
