"""Request smuggling and header hardening ("Correctness and hardening" in the
spec): each malformed request gets the given status, the connection is closed
afterwards, and where the request head itself is bad the application is never
called (checked through the application's /seen list of request targets).

Each case runs against the ASGI and the WSGI application: the parser is shared,
but the two paths into the application are not.  Where a reference server
deviates from the spec, that parameter is peregrine_only, with the reason."""

import uuid

import pytest

from conftest import HELLO

PEREGRINE_ONLY = pytest.mark.peregrine_only


def probe():
    return "probe=" + uuid.uuid4().hex


def assert_rejected(server, request, status, never_called=()):
    """Send request bytes; expect `status`, then a closed connection, and that
    none of the `never_called` probe strings reached the application."""
    with server.raw() as c:
        c.send(request)
        r = c.read_response()
        assert r.status == status, r
        c.expect_closed(timeout=5)
    if never_called:
        seen = server.get("/seen").json()
        for token in never_called:
            assert not [t for t in seen if token in t], "the application was called for %s: %s" % (token, seen)
    # the server is still healthy
    assert server.get("/").content == HELLO[server.kind]


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn (h11) accepts it and frames the body as chunked
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        "wsgi",
    ],
)
def test_content_length_with_transfer_encoding(raw_servers, kind):
    first, smuggled = probe(), probe()
    inner = b"GET /?%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % smuggled.encode()
    body = b"0\r\n\r\n" + inner
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n"
        % (first.encode(), len(body))
        + body
    )
    assert_rejected(raw_servers(kind), request, 400, never_called=[first, smuggled])


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_two_different_content_lengths(raw_servers, kind):
    first, smuggled = probe(), probe()
    inner = b"GET /?%s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % smuggled.encode()
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: %d\r\n\r\n"
        % (first.encode(), 5 + len(inner))
        + b"hello"
        + inner
    )
    assert_rejected(raw_servers(kind), request, 400, never_called=[first, smuggled])


@pytest.mark.parametrize(
    "kind,value",
    [
        ("asgi", "+5"),
        # uvicorn (h11) folds a list of identical values into one, as RFC 9110
        # allows a recipient to; Peregrine's spec rejects it
        pytest.param("asgi", "5,5", marks=PEREGRINE_ONLY),
        ("asgi", "abc"),
        ("asgi", "-1"),
        ("wsgi", "+5"),
        ("wsgi", "5,5"),
        ("wsgi", "abc"),
        ("wsgi", "-1"),
    ],
)
def test_malformed_content_length(raw_servers, kind, value):
    first = probe()
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %s\r\n\r\nhello"
        % (first.encode(), value.encode())
    )
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn (h11) answers 400 rather than 501
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        # gunicorn passes it to the application, which answers 200
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_transfer_encoding_gzip_not_implemented(raw_servers, kind):
    first = probe()
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip\r\n\r\nhello" % first.encode()
    )
    assert_rejected(raw_servers(kind), request, 501, never_called=[first])


@pytest.mark.parametrize(
    "kind",
    [
        "asgi",
        # gunicorn accepts it and passes the request on
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_transfer_encoding_gzip_chunked(raw_servers, kind):
    first = probe()
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"
        % first.encode()
    )
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_chunked_twice_as_separate_headers(raw_servers, kind):
    first = probe()
    request = (
        b"POST /echo?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % first.encode()
    )
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_whitespace_before_colon(raw_servers, kind):
    first = probe()
    request = b"GET /?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Foo : bar\r\n\r\n" % first.encode()
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn (h11) unfolds the continuation line and serves the request
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        "wsgi",
    ],
)
def test_obs_fold_continuation_line(raw_servers, kind):
    first = probe()
    request = b"GET /?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Foo: bar\r\n  baz\r\n\r\n" % first.encode()
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize(
    "kind",
    [
        "asgi",
        # gunicorn serves an HTTP/1.1 request without Host
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_missing_host_in_http11(raw_servers, kind):
    first = probe()
    request = b"GET /?%s HTTP/1.1\r\nX-Other: 1\r\n\r\n" % first.encode()
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_two_host_headers(raw_servers, kind):
    first = probe()
    request = b"GET /?%s HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n" % first.encode()
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])


# The two body errors below are found only after the head was accepted, and an
# ASGI application is started as soon as the head is parsed: the application
# may have been called, so only the status and the close are checked.


@pytest.mark.parametrize(
    "kind",
    [
        "asgi",
        # gunicorn closes the connection without a response
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_bad_chunk_size(raw_servers, kind):
    request = (
        b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nhello\r\n0\r\n\r\n"
    )
    assert_rejected(raw_servers(kind), request, 400)


@pytest.mark.parametrize(
    "kind",
    [
        "asgi",
        # gunicorn closes the connection without a response
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_chunk_data_not_followed_by_crlf(raw_servers, kind):
    request = (
        b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhelloXX0\r\n\r\n"
    )
    assert_rejected(raw_servers(kind), request, 400)


# ---------------------------------------------------------------------------
# Headers that must not reach the application


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn passes x_foo through to the scope
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        "wsgi",
    ],
)
def test_header_with_underscore_is_dropped(raw_servers, kind):
    server = raw_servers(kind)
    headers = {"X_Foo": "1", "X-Kept": "2"}
    if kind == "asgi":
        names = [n for n, _ in server.get("/scope", headers=headers).json()["headers"]]
        assert "x-kept" in names
        assert "x_foo" not in names
        assert "x-foo" not in names
    else:
        environ = server.get("/environ", headers=headers).json()
        assert environ["HTTP_X_KEPT"] == "2"
        # X_Foo would otherwise arrive as HTTP_X_FOO, indistinguishable from X-Foo
        assert "HTTP_X_FOO" not in environ


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn passes it to the scope
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        # gunicorn passes it as HTTP_PROXY (httpoxy)
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_proxy_header_is_dropped(raw_servers, kind):
    server = raw_servers(kind)
    headers = {"Proxy": "http://attacker.invalid:3128", "X-Kept": "2"}
    if kind == "asgi":
        names = [n for n, _ in server.get("/scope", headers=headers).json()["headers"]]
        assert "x-kept" in names
        assert "proxy" not in names
    else:
        environ = server.get("/environ", headers=headers).json()
        assert environ["HTTP_X_KEPT"] == "2"
        assert "HTTP_PROXY" not in environ


@pytest.mark.parametrize(
    "kind",
    [
        # uvicorn closes the connection without any response
        pytest.param("asgi", marks=PEREGRINE_ONLY),
        # gunicorn answers 400
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_response_header_with_crlf_gives_500(raw_servers, kind):
    server = raw_servers(kind)
    with server.raw() as c:
        c.send_request("GET", "/crlf-header")
        r = c.read_response()
    assert r.status == 500
    assert r.header("x-injected") is None
    assert b"x-injected" not in r.raw_head.lower()
    assert server.get("/").content == HELLO[kind]


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_garbage_request_line(raw_servers, kind):
    assert_rejected(raw_servers(kind), b"THIS IS NOT HTTP\r\n\r\n", 400)


@pytest.mark.parametrize(
    "kind",
    [
        "asgi",
        # gunicorn neither answers nor closes the connection
        pytest.param("wsgi", marks=PEREGRINE_ONLY),
    ],
)
def test_chunk_size_overflow(raw_servers, kind):
    request = (
        b"POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ffffffffffffffffffffff\r\nhello\r\n0\r\n\r\n"
    )
    assert_rejected(raw_servers(kind), request, 400)


@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_nul_in_header_value(raw_servers, kind):
    first = probe()
    request = b"GET /?%s HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Nul: a\x00b\r\n\r\n" % first.encode()
    assert_rejected(raw_servers(kind), request, 400, never_called=[first])
