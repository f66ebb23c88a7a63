"""Applications that break the protocol: each mistake gets a 500 (or, once the head is out, a closed
connection), an error in the server log naming the mistake, and the worker goes on serving."""

import pytest

from conftest import poll

pytestmark = pytest.mark.peregrine_only

ASGI_CASES = {
    # path: (expected status, or "cut": a 500 while the head is still held back, else a cut
    # connection, never a response completed as if nothing was wrong; words the log must contain)
    "/body-before-start": (500, "http.response.start"),
    "/start-twice": ("cut", "http.response.start"),
    "/send-after-end": (200, "after"),
    "/no-answer": (500, "without starting a response"),
    "/str-body": ("cut", "bytes"),
    "/status-str": (500, "'status'"),
    "/status-invalid": (500, "42"),
    "/header-int": (500, "bytes or str"),
    "/header-not-pair": (500, "pair"),
    "/unknown-message": (500, "http.response.teapot"),
}

WSGI_CASES = {
    "/not-iterable": (500, "iter"),
    "/str-chunks": ("cut", "bytes"),
    "/start-twice": (500, "start_response"),
    "/over-length": (200, None),
    "/no-start": (500, "start_response"),
    "/bad-status": (500, "status"),
    "/header-int": (500, "str"),
}


def outcome(server, path):
    with server.raw() as c:
        c.send(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
        try:
            r = c.read_response(timeout=10)
        except AssertionError:
            return "closed", None
        return r.status, r


def check(server, cases):
    for path, (expected, words) in cases.items():
        before = len(server.output())
        status, response = outcome(server, path)
        if expected == "cut":
            assert status in (500, "closed"), (path, status)
        else:
            assert status == expected, (path, status, response and response.body)
        if words:
            assert poll(lambda: words in server.output()[before:], timeout=10), (path, server.output()[before:][-2000:])
        # the worker goes on serving
        r = server.get("/fine")
        assert r.status_code == 200 and r.text == "fine", path


def test_asgi_mistakes(start_server):
    check(start_server("misbehaving:app", kind="asgi"), ASGI_CASES)


def test_wsgi_mistakes(start_server):
    check(start_server("misbehaving:wsgi", kind="wsgi"), WSGI_CASES)
