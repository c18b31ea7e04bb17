"""S3's XML documents: building responses (in S3's namespace) and reading request bodies
(CreateBucketConfiguration, Delete, CompleteMultipartUpload), plus S3's two time formats."""
from __future__ import annotations

import time
from datetime import timezone
from email.utils import formatdate, parsedate_to_datetime
from typing import Any
from xml.etree import ElementTree as ET

from ..protocol.xml_text import xml_text
from .errors import malformed_xml

NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
CONTENT_TYPE = "application/xml"


def element(parent: ET.Element | None, tag: str, text: Any = None) -> ET.Element:
    """A child element (or a root, with `parent=None`); booleans are written as S3 does."""
    node = ET.Element(tag) if parent is None else ET.SubElement(parent, tag)
    if text is not None:
        if isinstance(text, bool):
            text = "true" if text else "false"
        # Keys may hold what XML 1.0 cannot carry (S3 answers them url-encoded when asked).
        node.text = xml_text(str(text))
    return node


def document(tag: str) -> ET.Element:
    root = ET.Element(tag)
    root.set("xmlns", NAMESPACE)
    return root


def serialize(root: ET.Element) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8")


def parse(body: bytes) -> ET.Element:
    """A request document with namespaces dropped from its tags; MalformedXML if it does not parse."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError:
        raise malformed_xml() from None
    for node in root.iter():
        if isinstance(node.tag, str) and "}" in node.tag:
            node.tag = node.tag.split("}", 1)[1]
    return root


def iso8601(epoch: float) -> str:
    """LastModified in XML bodies: 2024-01-31T12:00:00.000Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch * 1000) % 1000:03d}Z"


def http_date(epoch: float) -> str:
    """Last-Modified in headers (RFC 7231, second precision)."""
    return formatdate(int(epoch), usegmt=True)


def parse_http_date(value: str | None) -> float | None:
    """A conditional header's date; None if absent or unparseable (S3 then ignores the condition)."""
    if not value:
        return None
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)).timestamp()
