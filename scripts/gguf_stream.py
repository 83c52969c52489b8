"""A GGUF v3 writer that streams tensor data (no tensor is held whole in memory) and hashes the bytes
as it writes them, plus a reader of raw key/value records so one file's keys (a tokenizer) can be
copied into another byte for byte. Needs numpy only; scripts/make_gemma4_gguf.py uses it.

Layout written (GGUF v3, little-endian): magic "GGUF", u32 version 3, u64 tensor count, u64 KV count;
the KVs; the tensor infos (name, u32 n_dims, u64 ne[n_dims] in ggml order (ne[0] contiguous),
u32 ggml type, u64 offset into the data section); zero padding to ALIGNMENT; the tensor data, each
tensor starting at a multiple of ALIGNMENT (general.alignment is not written, so readers use 32).
"""
import hashlib
import mmap
import struct

import numpy as np

ALIGNMENT = 32

# GGUF value types
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR_FMT = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
               BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_ARRAY_DTYPE = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
                FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}

# ggml types this writer knows: id, elements per block, bytes per block
F32, F16, Q4_0, Q8_0 = 0, 1, 2, 8
GGML_TYPES = {F32: ("F32", 1, 4), F16: ("F16", 1, 2), Q4_0: ("Q4_0", 32, 18), Q8_0: ("Q8_0", 32, 34)}


def tensor_nbytes(ne, ggml_type):
    """Bytes of a tensor of shape ne (ggml order); ne[0] must hold whole blocks."""
    _, block, size = GGML_TYPES[ggml_type]
    if ne[0] % block:
        raise ValueError(f"ne[0] = {ne[0]} is not a multiple of the {GGML_TYPES[ggml_type][0]} block ({block})")
    n = 1
    for d in ne:
        n *= d
    return n // block * size


def _string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def encode_kv(key, vtype, value, sub_type=None):
    """One KV record: key, u32 type, value. Arrays take sub_type and a sequence (strings or numbers)."""
    out = [_string(key), struct.pack("<I", vtype)]
    if vtype == STRING:
        out.append(_string(value))
    elif vtype == ARRAY:
        out.append(struct.pack("<IQ", sub_type, len(value)))
        if sub_type == STRING:
            out.extend(_string(v) for v in value)
        else:
            out.append(np.asarray(value, dtype=_ARRAY_DTYPE[sub_type]).tobytes())
    else:
        out.append(struct.pack(_SCALAR_FMT[vtype], value))
    return b"".join(out)


class _Cursor:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def skip_string(self):
        n = self.take("<Q")
        if self.pos + n > len(self.buf):
            raise ValueError(f"string of {n} bytes at offset {self.pos} runs past the end of the file")
        self.pos += n

    def string(self):
        start = self.pos + 8
        self.skip_string()
        return bytes(self.buf[start:self.pos]).decode("utf-8", errors="replace")

    def skip_value(self, vtype):
        if vtype == STRING:
            self.skip_string()
        elif vtype == ARRAY:
            sub, count = self.take("<IQ")
            if sub == STRING:
                for _ in range(count):
                    self.skip_string()
            elif sub in _ARRAY_DTYPE:
                self.pos += count * np.dtype(_ARRAY_DTYPE[sub]).itemsize
            else:
                raise ValueError(f"array of unsupported type {sub} at offset {self.pos}")
        elif vtype in _SCALAR_FMT:
            self.pos += struct.calcsize(_SCALAR_FMT[vtype])
        else:
            raise ValueError(f"unknown GGUF value type {vtype} at offset {self.pos}")


def _read_head(path, with_tensors):
    """(kvs, tensors): {key: raw KV record bytes} in file order, and with_tensors:
    {name: (ne, ggml type, absolute file offset)}. The file is mapped, so only its head is read."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf)
        if buf[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file (magic {buf[:4]!r})")
        cur.pos = 4
        kvs, tensors = {}, {}
        try:
            version, n_tensors, n_kv = cur.take("<IQQ")
            if version != 3:
                raise ValueError(f"{path}: GGUF version {version}, expected 3")
            for _ in range(n_kv):
                start = cur.pos
                key = cur.string()
                cur.skip_value(cur.take("<I"))
                kvs[key] = buf[start:cur.pos]
            for _ in range(n_tensors if with_tensors else 0):
                name = cur.string()
                n_dims = cur.take("<I")
                ne = struct.unpack_from(f"<{n_dims}Q", buf, cur.pos)
                cur.pos += 8 * n_dims
                tensors[name] = (ne,) + cur.take("<IQ")
        except struct.error:
            raise ValueError(f"{path}: truncated in its key/value or tensor-info section") from None
        if cur.pos > len(buf):
            raise ValueError(f"{path}: truncated in its key/value or tensor-info section")
    align = struct.unpack("<I", kvs["general.alignment"][-4:])[0] if "general.alignment" in kvs else ALIGNMENT
    data_start = -(-cur.pos // align) * align
    return kvs, {name: (ne, t, data_start + off) for name, (ne, t, off) in tensors.items()}


def read_raw_kvs(path):
    """{key: raw record bytes (key, type, value)} of a GGUF file's KV section, in file order."""
    return _read_head(path, False)[0]


def read_tensor_infos(path):
    """{tensor name: (ne in ggml order, ggml type, absolute file offset of its data)}."""
    return _read_head(path, True)[1]


class StreamWriter:
    """Writes the header, KVs and tensor infos at construction; then each tensor's data, in the order
    given, from an iterable of byte chunks (write_tensor). close() pads the end and returns
    (sha256 hex, size in bytes) of everything written."""

    def __init__(self, path, kv_records, tensors):
        """kv_records: encoded KV records (encode_kv / read_raw_kvs values);
        tensors: [(name, ne in ggml order, ggml type)]."""
        self.tensors = [(name, tuple(int(d) for d in ne), t, tensor_nbytes(ne, t)) for name, ne, t in tensors]
        names = [t[0] for t in self.tensors]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tensor names")
        self.sha = hashlib.sha256()
        self.size = 0
        self.next = 0
        self.f = open(path, "wb")
        infos, offset = [], 0
        for name, ne, t, nbytes in self.tensors:
            infos.append(_string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) +
                         struct.pack("<IQ", t, offset))
            offset += -(-nbytes // ALIGNMENT) * ALIGNMENT
        head = b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(kv_records))
        self._write(head + b"".join(kv_records) + b"".join(infos))
        self._pad()
        self.data_start = self.size

    def _write(self, b):
        self.f.write(b)
        self.sha.update(b)
        self.size += len(b)

    def _pad(self):
        self._write(b"\0" * (-self.size % ALIGNMENT))

    def write_tensor(self, name, chunks):
        if self.next >= len(self.tensors) or self.tensors[self.next][0] != name:
            raise ValueError(f"tensor {name} written out of order")
        _, _, _, nbytes = self.tensors[self.next]
        self.next += 1
        start = self.size
        for chunk in chunks:
            self._write(memoryview(chunk).cast("B"))
        if self.size - start != nbytes:
            raise ValueError(f"tensor {name}: {self.size - start} bytes written, {nbytes} expected")
        self._pad()

    def close(self):
        if self.next != len(self.tensors):
            raise ValueError(f"{len(self.tensors) - self.next} tensors not written")
        self.f.close()
        return self.sha.hexdigest(), self.size
