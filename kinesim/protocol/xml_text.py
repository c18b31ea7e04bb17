"""Text in the XML that AWS's XML protocols answer with (query: SNS, CloudFormation, STS; REST-XML:
S3): escaped, and without the characters XML 1.0 cannot carry (U+0000 to U+001F but tab, line
feed and carriage return; lone surrogates; U+FFFE and U+FFFF), each replaced by U+FFFD.

One of them in an answer makes it no XML document at all: an SDK cannot read it (botocore:
"Unable to parse response"), so a request with a NUL in a stack name, which the validation message
quotes back, got no error code for its client to read.
"""
from __future__ import annotations

import re

NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """`text` with what XML 1.0 cannot carry replaced by U+FFFD (escaping is the writer's)."""
    return NOT_XML.sub("\ufffd", text)


def escape(text: str) -> str:
    """Character data for an element: `xml_text`, then `&`, `<` and `>` escaped (as
    xml.sax.saxutils.escape, whose module imports urllib.request: 8 ms of start-up)."""
    return xml_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
