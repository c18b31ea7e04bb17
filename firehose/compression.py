"""The S3 destination's CompressionFormat: the bytes, key extension and Content-Encoding AWS uses.

| CompressionFormat | container                                   | extension | Content-Encoding |
|-------------------|---------------------------------------------|-----------|------------------|
| UNCOMPRESSED      | the records as they are                     | (none)    | (none)           |
| GZIP              | one gzip member                             | .gz       | gzip             |
| ZIP               | a zip archive, one deflated entry (a UUID)  | .zip      | zip              |
| Snappy            | snappy-java's stream format (xerial)        | .snappy   | snappy-java      |
| HADOOP_SNAPPY     | Hadoop's block format                       | .snappy   | hadoop-snappy    |

Two facts here differ from what AWS's documentation suggests, and follow what the service
is observed to deliver (objects compared byte for byte with snappy-java's output, reported
in floci-io/floci#2328): ``Snappy`` is *not* the official snappy framing format but
snappy-java's ``SnappyOutputStream`` format (16-byte header ``\\x82SNAPPY\\x00``, version 1,
compatible version 1, then per 32 KiB block a big-endian int32 compressed length and a raw
snappy block), and ``HADOOP_SNAPPY`` objects carry ``.snappy``, not the documented
``.hsnappy``. ``HADOOP_SNAPPY`` is snappy-java's ``SnappyHadoopCompatibleOutputStream``:
per 32 KiB block a big-endian int32 uncompressed length, a big-endian int32 compressed
length and a raw snappy block, which Hadoop's ``SnappyCodec`` (Spark, Hive, Athena) reads.
Raw snappy blocks come from cramjam; gzip and zip from the standard library.

Interface: ``compress(data, fmt) -> bytes``, ``decompress(data, fmt) -> bytes``,
``extension(fmt) -> str``, ``content_encoding(fmt) -> str | None``; ``fmt`` is the API's
CompressionFormat value, exact case (``Snappy``, not ``SNAPPY``); None means UNCOMPRESSED.
"""

from __future__ import annotations

import gzip
import io
import struct
import uuid
import zipfile

import cramjam

FORMATS = ("UNCOMPRESSED", "GZIP", "ZIP", "Snappy", "HADOOP_SNAPPY")

_EXTENSIONS = {"UNCOMPRESSED": "", "GZIP": ".gz", "ZIP": ".zip", "Snappy": ".snappy", "HADOOP_SNAPPY": ".snappy"}
_CONTENT_ENCODINGS = {
    "UNCOMPRESSED": None,
    "GZIP": "gzip",
    "ZIP": "zip",
    "Snappy": "snappy-java",
    "HADOOP_SNAPPY": "hadoop-snappy",
}

# snappy-java's SnappyOutputStream header: magic, format version, minimum compatible version.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
# snappy-java's default block size, used by both of its output streams.
BLOCK_SIZE = 32 * 1024


def _format(fmt: str | None) -> str:
    fmt = fmt or "UNCOMPRESSED"
    if fmt not in _EXTENSIONS:
        raise ValueError(f"unknown CompressionFormat {fmt!r}; expected one of {', '.join(FORMATS)}")
    return fmt


def extension(fmt: str | None) -> str:
    """The extension AWS appends to the object key for this CompressionFormat."""
    return _EXTENSIONS[_format(fmt)]


def content_encoding(fmt: str | None) -> str | None:
    """The Content-Encoding AWS sets on the delivered object (None: no header)."""
    return _CONTENT_ENCODINGS[_format(fmt)]


def compress(data: bytes, fmt: str | None) -> bytes:
    """The object body Firehose writes for ``data`` (the concatenated records)."""
    fmt = _format(fmt)
    if fmt == "GZIP":
        return gzip.compress(data, mtime=0)
    if fmt == "ZIP":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            # AWS names the single entry with a UUID unrelated to the object key.
            archive.writestr(str(uuid.uuid4()), data)
        return out.getvalue()
    if fmt == "Snappy":
        chunks = [_XERIAL_HEADER]
        for block in _blocks(data):
            raw = bytes(cramjam.snappy.compress_raw(block))
            chunks += [struct.pack(">i", len(raw)), raw]
        return b"".join(chunks)
    if fmt == "HADOOP_SNAPPY":
        chunks = []
        for block in _blocks(data):
            raw = bytes(cramjam.snappy.compress_raw(block))
            chunks += [struct.pack(">ii", len(block), len(raw)), raw]
        return b"".join(chunks)
    return bytes(data)


def decompress(data: bytes, fmt: str | None) -> bytes:
    """The records back from an object body written with ``fmt`` (by AWS or by `compress`)."""
    fmt = _format(fmt)
    if fmt == "GZIP":
        return gzip.decompress(data)
    if fmt == "ZIP":
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return b"".join(archive.read(name) for name in archive.namelist())
    if fmt == "Snappy":
        return _decompress_xerial(data)
    if fmt == "HADOOP_SNAPPY":
        return _decompress_hadoop(data)
    return bytes(data)


def _blocks(data: bytes) -> list[bytes]:
    return [data[i : i + BLOCK_SIZE] for i in range(0, len(data), BLOCK_SIZE)]


def _int32(data: bytes, offset: int) -> int:
    if offset + 4 > len(data):
        raise ValueError("truncated snappy stream")
    return struct.unpack_from(">i", data, offset)[0]


def _raw(data: bytes, offset: int, length: int) -> bytes:
    if length < 0 or offset + length > len(data):
        raise ValueError("truncated snappy stream")
    return bytes(cramjam.snappy.decompress_raw(data[offset : offset + length]))


def _decompress_xerial(data: bytes) -> bytes:
    if data[:8] != XERIAL_MAGIC or len(data) < len(_XERIAL_HEADER):
        raise ValueError("not a snappy-java stream (bad header)")
    out = bytearray()
    offset = len(_XERIAL_HEADER)
    while offset < len(data):
        length = _int32(data, offset)
        offset += 4
        out += _raw(data, offset, length)
        offset += length
    return bytes(out)


def _decompress_hadoop(data: bytes) -> bytes:
    # A block may hold several compressed chunks (Hadoop's own writer splits large ones).
    out = bytearray()
    offset = 0
    while offset < len(data):
        expected = _int32(data, offset)
        offset += 4
        produced = 0
        if expected == 0 and offset < len(data):
            # Hadoop's writer ends an empty stream with a zero-length block and one chunk.
            length = _int32(data, offset)
            if _raw(data, offset + 4, length):
                raise ValueError("hadoop-snappy block longer than its header says")
            offset += 4 + length
            continue
        while produced < expected:
            length = _int32(data, offset)
            offset += 4
            chunk = _raw(data, offset, length)
            offset += length
            out += chunk
            produced += len(chunk)
        if produced != expected:
            raise ValueError(f"hadoop-snappy block decoded to {produced} bytes, header says {expected}")
    return bytes(out)
