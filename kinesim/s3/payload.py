"""The body of an S3 write as it arrives, and the integrity checks S3 makes on it.

Framing: `Content-Length` bytes, or (no length, `Transfer-Encoding: chunked`, which the HTTP server
has already undone) everything until the end of the stream.

Content encoding `aws-chunked`, what the SDKs send for streaming uploads (`x-amz-content-sha256:
STREAMING-UNSIGNED-PAYLOAD-TRAILER` from boto3 over TLS and the newer SDKs, or the signed
`STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]` of the Java SDK):

    <size hex>[;chunk-signature=<sig>]\\r\\n <size bytes> \\r\\n ... 0[;chunk-signature=...]\\r\\n
    [x-amz-checksum-crc32:<base64>\\r\\n ...][x-amz-trailer-signature:<sig>\\r\\n] \\r\\n

is decoded here; chunk signatures are not checked (no signature is, anywhere in kinesim).

Checks, with S3's errors: `Content-MD5` (InvalidDigest / BadDigest), a hex `x-amz-content-sha256`
(XAmzContentSHA256Mismatch), `x-amz-decoded-content-length` (IncompleteBody), and one flexible
checksum `x-amz-checksum-<algorithm>` in a header or announced by `x-amz-trailer` (BadDigest).
CRC32, SHA1, SHA256, SHA512 and MD5 are computed and compared; CRC32C, CRC64NVME and the XXHASH
family need libraries kinesim does not ship, so their values are kept as sent, unverified.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from typing import Any, BinaryIO, Callable

from .errors import S3Error, bad_digest, incomplete_body, invalid_request

READ_SIZE = 1 << 20
MAX_LINE = 8192

# algorithm -> (a new hasher, digest size in bytes); None where kinesim cannot compute it
CHECKSUM_ALGORITHMS: dict[str, tuple[Callable[[], Any], int] | None] = {
    "CRC32": (lambda: _Crc32(), 4),
    "CRC32C": None,
    "CRC64NVME": None,
    "SHA1": (hashlib.sha1, 20),
    "SHA256": (hashlib.sha256, 32),
    "SHA512": (hashlib.sha512, 64),
    "MD5": (hashlib.md5, 16),
    "XXHASH64": None,
    "XXHASH3": None,
    "XXHASH128": None,
}
_DIGEST_SIZES = {"CRC32C": 4, "CRC64NVME": 8, "XXHASH64": 8, "XXHASH3": 8, "XXHASH128": 16}


def checksum_header(algorithm: str) -> str:
    return "x-amz-checksum-" + algorithm.lower()


class _Crc32:
    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)

    def digest(self) -> bytes:
        return self.value.to_bytes(4, "big")


class Framed:
    """The request's bytes: exactly Content-Length of them, or all until end of stream."""

    def __init__(self, stream: BinaryIO, length: int | None):
        self.stream, self.left = stream, length
        self.started = False  # whether anything was read (an HTTP server sends "100 Continue" then)
        self.eof = False

    @classmethod
    def of(cls, environ: dict[str, Any]) -> "Framed":
        length = environ.get("CONTENT_LENGTH")
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        return cls(environ["wsgi.input"], int(length) if length else None if chunked else 0)

    @property
    def finished(self) -> bool:
        """Whether the whole body has been read."""
        return self.left == 0 or self.eof

    def read(self, size: int = READ_SIZE) -> bytes:
        self.started = True
        if self.left is None:
            data = self.stream.read(size)
            self.eof = not data
            return data
        if self.left <= 0:
            return b""
        data = self.stream.read(min(size, self.left))
        if not data:
            raise incomplete_body()
        self.left -= len(data)
        return data

    def drain(self, limit: int) -> bool:
        """Read and drop what the client still sends, up to `limit` bytes; False if more was left."""
        if self.left is not None and self.left > limit:
            return False
        read = 0
        try:
            while chunk := self.read(READ_SIZE):
                read += len(chunk)
                if read > limit:
                    return False
        except S3Error:
            return False
        return True


class _AwsChunked:
    """Decodes the aws-chunked content encoding; `trailers` holds the trailing headers once read."""

    def __init__(self, raw: Framed):
        self.raw = raw
        self.buf = bytearray()
        self.left = 0        # bytes of the current chunk not yet returned
        self.done = False
        self.trailers: dict[str, str] = {}

    def _fill(self) -> bool:
        data = self.raw.read(64 * 1024)
        self.buf += data
        return bool(data)

    def _line(self) -> bytes:
        while (end := self.buf.find(b"\n")) < 0:
            if len(self.buf) > MAX_LINE:
                raise invalid_request("An aws-chunked chunk header or trailer line is too long.")
            if not self._fill():
                raise incomplete_body()
        line = bytes(self.buf[:end]).rstrip(b"\r")
        del self.buf[:end + 1]
        return line

    def _exact(self, size: int) -> bytes:
        while len(self.buf) < size:
            if not self._fill():
                raise incomplete_body()
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    def read(self, size: int = READ_SIZE) -> bytes:
        if self.done:
            return b""
        if self.left == 0:
            header = self._line()
            try:
                chunk_size = int(header.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise invalid_request("The aws-chunked request body has a malformed chunk header.") from None
            if chunk_size == 0:
                self._read_trailers()
                self.done = True
                return b""
            self.left = chunk_size
        if self.buf:
            data = bytes(self.buf[:min(size, self.left)])
            del self.buf[:len(data)]
        else:
            data = self.raw.read(min(size, self.left))
            if not data:
                raise incomplete_body()
        self.left -= len(data)
        if self.left == 0 and self._exact(2) != b"\r\n":
            raise invalid_request("The aws-chunked request body has a chunk that does not end with CRLF.")
        return data

    def _read_trailers(self) -> None:
        while True:
            try:
                line = self._line()
            except S3Error:
                if self.buf:
                    raise
                return  # the stream ended right after the last trailer: accept
            if not line:
                return
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise S3Error("MalformedTrailerError", "The request contained trailing data that was not "
                              "well-formed or did not conform to our published schema.", 400)
            self.trailers[name.strip().lower()] = value.strip()


class RequestBody:
    """A write request's body: `read()` returns the decoded bytes, `verify(md5)` runs S3's checks
    once they are all read and returns the flexible checksum to keep with the object, if any."""

    def __init__(self, environ: dict[str, Any], framed: "Framed"):
        self.environ = environ
        self.framed = framed
        self.content_sha256 = environ.get("HTTP_X_AMZ_CONTENT_SHA256", "")
        self.chunked = self.content_sha256.upper().startswith("STREAMING-")
        self.source: Framed | _AwsChunked = _AwsChunked(self.framed) if self.chunked else self.framed
        self.size = 0
        self.hashers: dict[str, Any] = {}
        self.content_md5 = self._content_md5()
        self.algorithm, self.expected, self.in_trailer = self._checksum_request()
        spec = CHECKSUM_ALGORITHMS.get(self.algorithm or "")
        if spec is not None:
            self.hashers[self.algorithm] = spec[0]()
        if _is_sha256_hex(self.content_sha256) and "SHA256" not in self.hashers:
            self.hashers["SHA256"] = hashlib.sha256()

    # headers, checked before the body is read

    def _header(self, name: str) -> str | None:
        return self.environ.get("HTTP_" + name.upper().replace("-", "_"))

    def _content_md5(self) -> bytes | None:
        value = self._header("Content-MD5")
        if value is None:
            return None
        try:
            digest = base64.b64decode(value, validate=True)
        except binascii.Error:
            digest = b""
        if len(digest) != 16:
            raise S3Error("InvalidDigest", "The Content-MD5 you specified was invalid.", 400, **{"Content-MD5": value})
        return digest

    def _checksum_request(self) -> tuple[str | None, str | None, bool]:
        """(algorithm, value sent in a header, whether the value comes as a trailer)."""
        sent = [(a, v) for a in CHECKSUM_ALGORITHMS if (v := self._header(checksum_header(a))) is not None]
        if len(sent) > 1:
            raise invalid_request("Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
        trailer = (self._header("x-amz-trailer") or "").strip().lower()
        trailer_algorithm = next((a for a in CHECKSUM_ALGORITHMS if checksum_header(a) == trailer), None)
        if trailer and trailer_algorithm is None:
            raise invalid_request("The value specified in the x-amz-trailer header is not supported")
        declared = (self._header("x-amz-sdk-checksum-algorithm") or "").upper() or None
        if declared is not None and declared not in CHECKSUM_ALGORITHMS:
            raise invalid_request(f"Checksum algorithm provided is unsupported. Please try again with any of the "
                                  f"valid types: [{', '.join(CHECKSUM_ALGORITHMS)}]")
        if sent:
            algorithm, value = sent[0]
            _decode_checksum(algorithm, value, "header")
            return algorithm, value, False
        if trailer_algorithm is not None:
            return trailer_algorithm, None, True
        if declared is not None:
            raise invalid_request("x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* "
                                  "or x-amz-trailer headers were found.")
        return None, None, False

    # the body

    def read(self, size: int = READ_SIZE) -> bytes:
        data = self.source.read(size)
        if data:
            self.size += len(data)
            for hasher in self.hashers.values():
                hasher.update(data)
        return data

    def verify(self, md5: bytes) -> dict[str, str]:
        """S3's checks on the complete body (its MD5 computed by whoever stored it); returns
        {algorithm: base64 value} of the flexible checksum sent, if any."""
        decoded_length = self._header("x-amz-decoded-content-length")
        if self.chunked and decoded_length is not None and decoded_length.isdigit() \
                and int(decoded_length) != self.size:
            raise incomplete_body()
        if self.content_md5 is not None and self.content_md5 != md5:
            raise bad_digest("The Content-MD5 you specified did not match what we received.",
                             ExpectedDigest=base64.b64encode(self.content_md5).decode(),
                             CalculatedDigest=base64.b64encode(md5).decode())
        if _is_sha256_hex(self.content_sha256):
            computed = self.hashers["SHA256"].digest().hex()
            if computed != self.content_sha256.lower():
                raise S3Error("XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not "
                              "match what was computed.", 400, ClientComputedContentSHA256=self.content_sha256,
                              S3ComputedContentSHA256=computed)
        if self.algorithm is None:
            return {}
        value = self.expected
        if self.in_trailer:
            trailers = self.source.trailers if isinstance(self.source, _AwsChunked) else {}
            value = trailers.get(checksum_header(self.algorithm))
            if value is None:
                raise S3Error("MalformedTrailerError", "The request contained trailing data that was not "
                              "well-formed or did not conform to our published schema.", 400)
            _decode_checksum(self.algorithm, value, "trailing header")
        hasher = self.hashers.get(self.algorithm)
        if hasher is not None and base64.b64encode(hasher.digest()).decode() != value:
            raise bad_digest(f"The {self.algorithm} you specified did not match the calculated checksum.")
        return {self.algorithm: value}


def _decode_checksum(algorithm: str, value: str, where: str) -> bytes:
    spec = CHECKSUM_ALGORITHMS[algorithm]
    size = spec[1] if spec else _DIGEST_SIZES[algorithm]
    try:
        digest = base64.b64decode(value, validate=True)
    except binascii.Error:
        digest = b""
    if len(digest) != size:
        raise invalid_request(f"Value for {checksum_header(algorithm)} {where} is invalid.")
    return digest


def _is_sha256_hex(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdefABCDEF" for c in value)
