"""A table of raw HTTP/1.1 requests about framing, each followed by a second request (which
asks to close), for `serve` under each of uvicorn's parsers: what one parser reads as the
end of a request, the other as the start of the next, shows as a different list of answers.

`FRAMING_CASES` maps a case's name to its bytes; `PARSER_DIFFERENCES` lists the cases whose
answers differ between h11 and httptools, each with the answers under each (docs/api.md,
"HTTP framing under serve", says why each is harmless).
"""

from __future__ import annotations

HOST = b"Host: 127.0.0.1\r\n"
JSON = b"Content-Type: application/json\r\n"
BODY = b'{"input":["a red block"]}'
#: The request after each case: answered when the case left the connection readable.
SECOND = b"GET /health HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n"


def post(
    headers: bytes, body: bytes = BODY, line: bytes = b"POST /v1/embeddings HTTP/1.1"
) -> bytes:
    return line + b"\r\n" + HOST + JSON + headers + b"\r\n" + body


def length(n: int | bytes = len(BODY)) -> bytes:
    return b"Content-Length: " + (n if isinstance(n, bytes) else b"%d" % n) + b"\r\n"


def chunked(body: bytes = BODY, size: bytes | None = None, end: bytes = b"0\r\n\r\n") -> bytes:
    return (size if size is not None else b"%x" % len(body)) + b"\r\n" + body + b"\r\n" + end


TE = b"Transfer-Encoding: chunked\r\n"
PATH = b"/v1/embeddings HTTP/1.1"

FRAMING_CASES: dict[str, bytes] = {
    # Content-Length
    "content-length": post(length()),
    "content-length with leading zeros": post(length(b"000%d" % len(BODY))),
    "content-length +N": post(length(b"+%d" % len(BODY))),
    "content-length -1": post(length(b"-1")),
    "content-length hex": post(length(b"0x%x" % len(BODY))),
    "content-length with a space inside": post(length(b"2 5")),
    "content-length empty": post(length(b"")),
    "content-length past 64 bits": post(length(b"9" * 25)),
    "content-length twice, same": post(length() + length()),
    "content-length twice, differing": post(length() + length(3)),
    "content-length list": post(length(b"%d, %d" % (len(BODY), len(BODY)))),
    "content-length shorter than the body": post(length(10)),
    "content-length 0 with a body": post(length(0)),
    "content-length with trailing tab": post(length(b"%d\t" % len(BODY))),
    # Transfer-Encoding
    "chunked": post(TE, chunked()),
    "chunked with content-length": post(TE + length(), chunked()),
    "chunked in HTTP/1.0": post(TE, chunked(), line=b"POST /v1/embeddings HTTP/1.0"),
    "CHUNKED": post(b"Transfer-Encoding: CHUNKED\r\n", chunked()),
    "chunked<TAB>": post(b"Transfer-Encoding: chunked\t\r\n", chunked()),
    "chunked<SP>": post(b"Transfer-Encoding: chunked \r\n", chunked()),
    "gzip, chunked": post(b"Transfer-Encoding: gzip, chunked\r\n", chunked()),
    "chunked, chunked": post(b"Transfer-Encoding: chunked, chunked\r\n", chunked()),
    "two chunked headers": post(TE + TE, chunked()),
    "identity": post(b"Transfer-Encoding: identity\r\n" + length()),
    "chunked then identity": post(b"Transfer-Encoding: chunked, identity\r\n", chunked()),
    "xchunked": post(b"Transfer-Encoding: xchunked\r\n", chunked()),
    # Chunks
    "chunk extension": post(TE, chunked(size=b"%x;name=value" % len(BODY))),
    "chunk extension, quoted": post(TE, chunked(size=b'%x;name="v a"' % len(BODY))),
    "chunk size not hex": post(TE, chunked(size=b"zz")),
    "chunk size past 64 bits": post(TE, chunked(size=b"1" + b"0" * 16)),
    "chunk size with leading zeros": post(TE, chunked(size=b"000%x" % len(BODY))),
    "chunk size with leading space": post(TE, chunked(size=b" %x" % len(BODY))),
    "chunk size with trailing space": post(TE, chunked(size=b"%x " % len(BODY))),
    "chunk size 0x": post(TE, chunked(size=b"0x%x" % len(BODY))),
    "chunk data longer than its size": post(TE, chunked(size=b"%x" % (len(BODY) - 2))),
    "chunk without its CRLF": post(TE, b"%x\r\n" % len(BODY) + BODY + b"0\r\n\r\n"),
    "chunk lines ending in LF": post(TE, b"%x\n" % len(BODY) + BODY + b"\n0\n\n"),
    "last chunk with a trailer": post(TE, chunked(end=b"0\r\nX-Trailer: v\r\n\r\n")),
    "last chunk with a bad trailer": post(TE, chunked(end=b"0\r\nnot a trailer\r\n\r\n")),
    # Request line
    "request line ending in LF": post(length(), line=b"POST /v1/embeddings HTTP/1.1\n"[:-1])
    .replace(b"HTTP/1.1\r\n", b"HTTP/1.1\n", 1),
    "two spaces in the request line": post(length(), line=b"POST  /v1/embeddings HTTP/1.1"),
    "HTTP/1.2": post(length(), line=b"POST /v1/embeddings HTTP/1.2"),
    "HTTP/2.0": post(length(), line=b"POST /v1/embeddings HTTP/2.0"),
    "HTTP/1.1 lowercase": post(length(), line=b"POST /v1/embeddings http/1.1"),
    "lowercase method": post(length(), line=b"post /v1/embeddings HTTP/1.1"),
    "unknown method": post(length(), line=b"BREW /v1/embeddings HTTP/1.1"),
    "asterisk target": post(length(), line=b"POST * HTTP/1.1"),
    "target without slash": post(length(), line=b"POST v1/embeddings HTTP/1.1"),
    "absolute target on loopback": post(length(), line=b"POST http://127.0.0.1" + PATH),
    "absolute target elsewhere": post(length(), line=b"POST http://evil.example" + PATH),
    "target with a fragment": post(length(), line=b"POST /v1/embeddings#x HTTP/1.1"),
    "target with a raw byte past ASCII": post(length(), line=b"POST /v1/\xe9 HTTP/1.1"),
    "NUL in the request line": post(length(), line=b"POST /v1/\x00 HTTP/1.1"),
    "empty line before the request": b"\r\n" + post(length()),
    # Headers
    "headers ending in LF": post(length()).replace(b"\r\n", b"\n", 3),
    "space before a colon": post(length() + b"X-A : b\r\n"),
    "folded header": post(length() + b"X-A: b\r\n c\r\n"),
    "header name with a bad character": post(length() + b"X(a): b\r\n"),
    "header without a colon": post(length() + b"X-A b\r\n"),
    "empty header name": post(length() + b": b\r\n"),
    "NUL in a header value": post(length() + b"X-A: b\x00c\r\n"),
    "CR in a header value": post(length() + b"X-A: b\rc\r\n"),
    "byte past ASCII in a header value": post(length() + b"X-A: \xe9\r\n"),
    "no Host": post(length()).replace(HOST, b""),
    "two Host headers": post(length() + HOST),
    "empty Host": post(length()).replace(HOST, b"Host: \r\n"),
    "Host [::1]evil.example": post(length()).replace(HOST, b"Host: [::1]evil.example\r\n"),
    "Expect: 100-continue": post(length() + b"Expect: 100-continue\r\n"),
    "Connection: close": post(length() + b"Connection: close\r\n"),
    "HTTP/1.0 keep-alive": post(
        length() + b"Connection: keep-alive\r\n", line=b"POST /v1/embeddings HTTP/1.0"
    ),
}  # fmt: skip

#: Cases whose answers differ between the parsers: (h11's, httptools's), each an answer list
#: ("-" where none came in time, ``closed`` once the connection was closed).
PARSER_DIFFERENCES: dict[str, tuple[str, str]] = {
    # A form RFC 9112 lets a server accept or refuse: h11 accepts, llhttp refuses; the body
    # is framed the same way by both wherever it is accepted.
    "chunked<TAB>": ("200 200 closed", "400 closed"),  # RFC 9110 5.5: OWS is no part of it
    "chunk size with trailing space": ("200 200 closed", "400 closed"),
    "content-length list": ("200 200 closed", "400 closed"),  # RFC 9110 8.6: equal values
    "content-length twice, same": ("200 200 closed", "400 closed"),
    "folded header": ("200 200 closed", "400 closed"),  # RFC 9112 5.2: unfold or refuse
    "headers ending in LF": ("200 200 closed", "400 closed"),  # RFC 9112 2.2: MAY accept LF
    "request line ending in LF": ("200 200 closed", "400 closed"),
    # llhttp splits on runs of spaces (RFC 9112 section 3 allows it), h11 does not.
    "two spaces in the request line": ("400 closed", "200 200 closed"),
    # Refused either way: llhttp knows a fixed list of methods (400), h11 takes any token
    # and the app refuses it (405).
    "lowercase method": ("405 closed", "400 closed"),
    "unknown method": ("405 closed", "400 closed"),
}
