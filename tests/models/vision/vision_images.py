"""Synthetic test images of varied sizes and aspect ratios, written as PNG with the standard
library only (zlib), so the vision tests need no imaging package."""
import os
import struct
import zlib

import numpy as np

# (width, height): landscape, portrait, square, panorama, tiny, odd sizes, larger than one tile.
SIZES = [(640, 480), (480, 640), (512, 512), (1024, 256), (300, 200), (1500, 900), (97, 389),
         (800, 800), (33, 17), (1200, 1601)]


def image(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    r = 127 + 120 * np.sin(x / (7 + seed) + y / 23)
    g = 255 * x / max(w - 1, 1)
    b = 255 * ((x // 16 + y // 16) % 2)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_png(path, rgb):
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[i].tobytes() for i in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))


def write_all(folder):
    paths = []
    for i, (w, h) in enumerate(SIZES):
        p = os.path.join(folder, f"img{i}_{w}x{h}.png")
        write_png(p, image(w, h, i))
        paths.append(p)
    return paths
