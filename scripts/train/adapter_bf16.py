#!/usr/bin/env python3
"""Rewrites a PEFT adapter's F32 tensors as BF16 (round to nearest even), as PEFT itself saves an adapter trained in
bf16: the same names, shapes, order and metadata, half the bytes. The shipped shipment_tracking adapter was trained
in fp32 and saved so (797 KB); its BF16 copy (404 KB) keeps the tracked tree under the limit that travels to the GPU
machine. Stdlib only.

    python3 scripts/train/adapter_bf16.py IN.safetensors OUT.safetensors
"""
import array
import json
import struct
import sys


def bf16_bytes(raw):
    """Little-endian F32 bytes -> BF16 bytes, nearest even (a NaN stays a quiet NaN)."""
    f = array.array("I", raw)
    if sys.byteorder != "little":
        f.byteswap()
    out = array.array("H", bytes(2 * len(f)))
    for i, u in enumerate(f):
        if (u & 0x7F800000) == 0x7F800000 and (u & 0x007FFFFF):
            out[i] = (u >> 16) | 0x0040
        else:
            out[i] = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
    if sys.byteorder != "little":
        out.byteswap()
    return out.tobytes()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: adapter_bf16.py IN.safetensors OUT.safetensors")
    with open(sys.argv[1], "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    names = sorted((k for k in head if k != "__metadata__"), key=lambda k: head[k]["data_offsets"][0])
    out, blobs, off = {}, [], 0
    if "__metadata__" in head:
        out["__metadata__"] = head["__metadata__"]
    for k in names:
        v = head[k]
        b, e = v["data_offsets"]
        if v["dtype"] == "F32":
            blob = bf16_bytes(data[b:e])
        elif v["dtype"] in ("BF16", "F16"):
            blob = data[b:e]
        else:
            sys.exit("adapter_bf16.py: %s: dtype %s is not a float" % (k, v["dtype"]))
        out[k] = {"dtype": "BF16" if v["dtype"] == "F32" else v["dtype"], "shape": v["shape"],
                  "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


if __name__ == "__main__":
    main()
