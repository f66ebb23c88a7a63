"""--compress: application responses compressed with br, zstd or gzip (issue 16, items 10-14).

Clients: httpx (reading the raw body and decoding it here, with ``brotli``, ``zstandard`` and ``zlib``),
curl ``--compressed``, httpx over h2c, and headless Chromium over HTTP/3 (chromium.py), which decodes br
and zstd itself and reports the Content-Encoding it received.

Streaming is checked without any timing: ``/sse`` produces event i+1 only once the client has called
``/ack`` for event i, and the client calls it only after decoding event i from what has arrived. A
compressor that held a piece back would leave the test waiting for an event the app never makes.

Application: ``apps/compress_app.py``.
"""

import gzip
import subprocess
import uuid
import zlib

import httpx
import pytest

pytestmark = pytest.mark.peregrine_only

APP = "compress_app:app"
PATTERN = b'{"id": 12345, "name": "peregrine", "tags": ["fast", "small"], "ok": true}\n'


def text(size):
    return (PATTERN * (size // len(PATTERN) + 1))[:size]


def brotli_module():
    return pytest.importorskip("brotli", reason="the brotli decoder (requirements.txt) is not installed")


def zstd_module():
    return pytest.importorskip("zstandard", reason="the zstandard decoder (requirements.txt) is not installed")


def decode(coding, data):
    if coding == "br":
        return brotli_module().decompress(data)
    if coding == "zstd":
        return zstd_module().ZstdDecompressor().decompressobj().decompress(data)
    if coding == "gzip":
        return gzip.decompress(data)
    assert coding is None, coding
    return data


class StreamDecoder:
    """Decodes a body piece by piece, as it arrives; each piece must be decodable at once."""

    def __init__(self, coding):
        if coding == "br":
            self.decoder = brotli_module().Decompressor()
            self.feed = self.decoder.process
        elif coding == "zstd":
            self.decoder = zstd_module().ZstdDecompressor().decompressobj()
            self.feed = self.decoder.decompress
        elif coding == "gzip":
            self.decoder = zlib.decompressobj(wbits=31)
            self.feed = self.decoder.decompress
        else:
            self.feed = bytes


def get_raw(server, path, accept_encoding, method="GET", headers=None, http2=False):
    """(response, raw body bytes as sent): httpx does not decode what iter_raw gives."""
    headers = dict(headers or {})
    if accept_encoding is not None:
        headers["accept-encoding"] = accept_encoding
    with httpx.Client(base_url=server.url, timeout=15, http1=not http2, http2=http2) as client:
        with client.stream(method, path, headers=headers) as r:
            return r, b"".join(r.iter_raw())


def without_accept_encoding(server, path):
    """A request with no Accept-Encoding at all (httpx always sends one)."""
    raw = server.raw()
    raw.send(b"GET %s HTTP/1.1\r\nhost: x\r\n\r\n" % path.encode())
    return raw.read_response()


@pytest.fixture(scope="module")
def server(start_module_server):
    return start_module_server(APP, "--compress")


@pytest.fixture(scope="module")
def server_min0(start_module_server):
    """--compress-min-size 0: only the status rules keep empty answers uncompressed."""
    return start_module_server(APP, "--compress", "--compress-min-size", "0")


# ---------------------------------------------------------------------------
# 10. the codings, chosen from Accept-Encoding


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip"])
def test_each_coding_decodes_to_the_body(server, coding):
    r, raw = get_raw(server, "/body?size=20000", coding)
    assert r.status_code == 200
    assert r.headers["content-encoding"] == coding
    assert r.headers["vary"] == "Accept-Encoding"
    assert int(r.headers["content-length"]) == len(raw), "framed by the compressed body"
    assert len(raw) < 20000 // 4, len(raw)
    assert decode(coding, raw) == text(20000)


def test_zstd_window_is_at_most_8_mib(server):
    zstandard = zstd_module()
    _, raw = get_raw(server, "/body?size=300000", "zstd")
    params = zstandard.get_frame_parameters(raw)
    assert 0 < params.window_size <= 8 * 1024 * 1024, params.window_size


@pytest.mark.parametrize("accept, expected", [
    ("gzip, deflate, br, zstd", "br"),
    ("gzip, zstd", "zstd"),
    ("deflate, gzip", "gzip"),
    ("br;q=0.5, gzip", "gzip"),
    ("br;q=0.2, zstd;q=0.9, gzip;q=0.5", "zstd"),
    ("gzip;q=0", None),
    ("br;q=0, zstd;q=0, gzip", "gzip"),
    ("*", "br"),
    ("*;q=0", None),
    ("*;q=0, gzip", "gzip"),
    ("*, br;q=0", "zstd"),
    ("identity;q=0", None),  # refused identity and nothing else acceptable: identity anyway, no 406
    ("identity;q=0, gzip", "gzip"),
    ("gzip;q=0.5, identity", None),
    ("GZIP", "gzip"),
    ("Br;Q=1, GZIP;q=0.9", "br"),
    ("x-gzip", "gzip"),
    ("deflate", None),
    ("br;q=2, gzip", "gzip"),  # a malformed weight drops that element only
    ("", None),
])
def test_negotiation(server, accept, expected):
    r, raw = get_raw(server, "/body?size=5000", accept)
    assert r.headers.get("content-encoding") == expected, (accept, r.headers)
    assert r.headers["vary"] == "Accept-Encoding", "the answer depends on Accept-Encoding either way"
    assert decode(expected, raw) == text(5000)
    if expected is None:
        assert r.headers["content-length"] == "5000"


def test_no_accept_encoding_means_identity(server):
    r = without_accept_encoding(server, "/body?size=5000")
    assert r.status == 200
    assert r.header("content-encoding") is None, r.headers
    assert r.body == text(5000)


def test_curl_compressed(server):
    out = subprocess.run(["curl", "-sS", "--compressed", "-D", "-", "-o", "-", server.url + "/body?size=30000"],
                         check=True, capture_output=True, timeout=30).stdout
    head, _, body = out.partition(b"\r\n\r\n")
    headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])
    assert headers[b"content-encoding"] in (b"br", b"zstd", b"gzip"), headers
    assert body == text(30000)


@pytest.mark.parametrize("path, compressed", [
    ("/body?type=text/html;%20charset=utf-8", True),
    ("/body?type=text/css", True),
    ("/body?type=application/javascript", True),
    ("/body?type=application/problem%2Bjson", True),
    ("/body?type=image/svg%2Bxml", True),
    ("/body?type=application/xml", True),
    ("/body?type=image/png", False),
    ("/body?type=application/octet-stream", False),
    ("/body?type=font/woff2", False),
])
def test_compressible_types(server, path, compressed):
    r, raw = get_raw(server, path, "gzip")
    assert (r.headers.get("content-encoding") == "gzip") == compressed, r.headers
    assert decode("gzip" if compressed else None, raw) == text(4096)


# ---------------------------------------------------------------------------
# 11. what is left alone


@pytest.mark.parametrize("path, headers", [
    ("/body?h=content-encoding:gzip", {}),             # already encoded (the app's claim, passed on)
    ("/body?h=cache-control:public,%20no-transform", {}),  # the application opts out
    ("/body?status=206&h=content-range:bytes%200-4095/9000", {}),
    ("/body", {"range": "bytes=0-99"}),                # a request with Range
    ("/body?size=1023", {}),                           # declared smaller than --compress-min-size
    ("/body?size=1023&length=0", {}),                  # one piece, smaller
])
def test_left_alone(server, path, headers):
    r, raw = get_raw(server, path, "br, zstd, gzip", headers=headers)
    expected = r.headers.get("content-encoding")
    assert expected in (None, "gzip") and (expected is None or "h=content-encoding" in path), r.headers
    assert "accept-encoding" not in r.headers.get("vary", "").lower(), r.headers
    size = 1023 if "1023" in path else 4096
    assert raw == text(size), "sent as the application made it"


def test_at_min_size_is_compressed(server):
    r, raw = get_raw(server, "/body?size=1024", "gzip")
    assert r.headers["content-encoding"] == "gzip"
    assert decode("gzip", raw) == text(1024)


@pytest.mark.parametrize("status", [204, 304])
def test_bodiless_statuses_left_alone(server_min0, status):
    r, raw = get_raw(server_min0, "/body?size=0&length=0&status=%d" % status, "gzip")
    assert r.status_code == status
    assert "content-encoding" not in r.headers and "vary" not in r.headers, r.headers
    assert raw == b""


def test_min_size_zero_compresses_small_bodies(server_min0):
    r, raw = get_raw(server_min0, "/body?size=10", "gzip")
    assert r.headers["content-encoding"] == "gzip"
    assert decode("gzip", raw) == text(10)


def test_unknown_length_is_compressed_as_a_stream(server):
    r, raw = get_raw(server, "/chunks?n=5&size=3000", "zstd")
    assert r.headers["content-encoding"] == "zstd"
    assert r.headers["transfer-encoding"] == "chunked" and "content-length" not in r.headers, r.headers
    assert decode("zstd", raw) == text(3000) * 5


# ---------------------------------------------------------------------------
# 13. headers


def test_vary_is_appended_to(server):
    r, raw = get_raw(server, "/body?h=vary:Origin", "br")
    assert r.headers["content-encoding"] == "br"
    assert r.headers.get_list("vary") == ["Origin", "Accept-Encoding"], r.headers
    r, _ = get_raw(server, "/body?h=vary:Accept-Encoding,%20Origin", "br")
    assert r.headers.get_list("vary") == ["Accept-Encoding, Origin"], "named already: not repeated"


@pytest.mark.parametrize("etag, sent", [('"v1"', 'W/"v1"'), ('W/"v2"', 'W/"v2"')])
def test_strong_etag_becomes_weak(server, etag, sent):
    r, _ = get_raw(server, "/body?h=etag:" + etag, "gzip")
    assert r.headers["content-encoding"] == "gzip"
    assert r.headers["etag"] == sent
    r, _ = get_raw(server, "/body?h=etag:" + etag, None, headers={"accept-encoding": "identity"})
    assert r.headers["etag"] == etag, "the identity representation keeps its tag"


@pytest.mark.parametrize("if_none_match", ['W/"v3"', '"v3"', '"other", W/"v3"', '*'])
def test_if_none_match_is_compared_weakly(server, if_none_match):
    r, raw = get_raw(server, '/body?h=etag:"v3"&h=cache-control:max-age=60', "br", headers={"if-none-match": if_none_match})
    assert r.status_code == 304, r.headers
    assert raw == b""
    assert r.headers["etag"] == 'W/"v3"' and r.headers["vary"] == "Accept-Encoding"
    assert r.headers["cache-control"] == "max-age=60"
    assert "content-encoding" not in r.headers and "content-length" not in r.headers, r.headers


def test_if_none_match_of_another_tag_gets_the_body(server):
    r, raw = get_raw(server, '/body?h=etag:"v4"', "br", headers={"if-none-match": 'W/"v3"'})
    assert r.status_code == 200 and r.headers["content-encoding"] == "br"
    assert decode("br", raw) == text(4096)


def test_head_gets_the_headers_of_get(server):
    get, _ = get_raw(server, "/body?size=8000", "br")
    head, raw = get_raw(server, "/body?size=8000", "br", method="HEAD")
    assert raw == b""
    for name in ("content-encoding", "vary", "content-type"):
        assert head.headers[name] == get.headers[name], name
    assert "content-length" not in head.headers, "no length of the identity body under a coding"


# ---------------------------------------------------------------------------
# 12. streaming stays streaming


def stream_with_acks(server, path, coding, sent, ack_params):
    """Reads path's compressed stream, decoding each piece as it arrives; once the first i+1 pieces
    the app sends (`sent`) are decoded, calls /ack?i=i, without which the app never sends piece i+1.
    Returns everything decoded."""
    decoder = StreamDecoder(coding)
    decoded = b""
    acked = 0
    with httpx.Client(base_url=server.url, timeout=15) as acks, httpx.Client(base_url=server.url, timeout=15) as client:
        with client.stream("GET", path, headers={"accept-encoding": coding}) as r:
            assert r.headers["content-encoding"] == coding, r.headers
            for piece in r.iter_raw():
                decoded += decoder.feed(piece)
                while acked < len(sent) - 1 and decoded.startswith(b"".join(sent[:acked + 1])):
                    assert acks.get("/ack", params=dict(ack_params, i=acked)).status_code == 200
                    acked += 1
    assert acked == len(sent) - 1, "every piece decoded before the next was produced"
    return decoded


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip"])
def test_sse_events_decode_on_arrival(server, coding):
    events = 5
    sid = uuid.uuid4().hex
    sent = [b"id: %d\ndata: event %d\n\n" % (i, i) for i in range(events)]
    assert stream_with_acks(server, "/sse?n=%d&id=%s" % (events, sid), coding, sent, {"id": sid}) == b"".join(sent)


def test_wsgi_blocks_decode_on_arrival(start_server):
    # a second thread answers /ack while the first waits in the generator
    wsgi = start_server("compress_app:wsgi", "--compress", "--wsgi-threads", "2")
    sent = [b"block %d\n" % i + text(3000) for i in range(4)]
    assert stream_with_acks(wsgi, "/blocks?n=4&size=3000", "gzip", sent, {}) == b"".join(sent)


# ---------------------------------------------------------------------------
# 14. HTTP/2 and HTTP/3


def test_http2_prior_knowledge(server):
    r, raw = get_raw(server, "/body?size=20000", "zstd", http2=True)
    assert r.http_version == "HTTP/2"
    assert r.headers["content-encoding"] == "zstd"
    assert decode("zstd", raw) == text(20000)
    r, raw = get_raw(server, "/chunks?n=3&size=3000", "br", http2=True)
    assert r.headers["content-encoding"] == "br" and "content-length" not in r.headers
    assert decode("br", raw) == text(3000) * 3


def test_chromium_over_http3_decodes_br_and_zstd(start_server, certs, browser):
    from test_http3 import fetch_h3, open_h3, start_h3

    h3 = start_h3(start_server, certs, "--compress", target=APP)
    page = open_h3(browser, h3.port, path="/page", server=h3)
    try:
        r = fetch_h3(page, "/body?size=50000")
        assert r.headers["content-encoding"] == "br", r.headers  # Chromium offers br and zstd: br wins the tie
        assert r.body == text(50000)
        # fetch() may not set Accept-Encoding; DevTools may
        page.send("Network.enable")
        page.send("Network.setExtraHTTPHeaders", {"headers": {"Accept-Encoding": "zstd"}})
        r = fetch_h3(page, "/body?size=50000")
        assert r.headers["content-encoding"] == "zstd", r.headers
        assert r.body == text(50000)
        r = fetch_h3(page, "/chunks?n=4&size=5000")
        assert r.headers["content-encoding"] == "zstd", r.headers
        assert r.body == text(5000) * 4
    finally:
        page.close()


from test_http3 import browser  # noqa: E402,F401 (module fixture: headless Chromium forced onto QUIC)
from test_tls import certs  # noqa: E402,F401 (module fixture: the test certificates)
