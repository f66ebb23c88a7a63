"""Flask on Peregrine: forms (urlencoded and multipart), JSON, streaming with
stream_with_context, cookies, a 404 handler, an error handler, remote_addr."""

import pytest

pytest.importorskip(
    "flask", reason="Flask needs markupsafe, which has a wheel here only for CPython 3.11"
)

# Flask needs markupsafe, whose mirror wheels exist for CPython 3.11 only.
pytest.importorskip("flask", reason="Flask is not installable for this Python on this machine")


@pytest.fixture(scope="module")
def flask_server(start_module_server):
    return start_module_server("flask_app:app")


def test_index(flask_server):
    assert flask_server.get("/").text == "hello, flask"


def test_urlencoded_form(flask_server):
    r = flask_server.post("/form", data={"name": "Ada Lovelace", "tag": ["x", "y"]})
    assert r.status_code == 200
    assert r.json() == {
        "form": {"name": ["Ada Lovelace"], "tag": ["x", "y"]},
        "content_type": "application/x-www-form-urlencoded",
    }


def test_multipart_form(flask_server):
    content = bytes(range(256)) * 40
    r = flask_server.post(
        "/upload",
        data={"title": "a file"},
        files={"document": ("report.bin", content, "application/octet-stream")},
    )
    assert r.status_code == 200
    out = r.json()
    assert out["filename"] == "report.bin"
    assert out["size"] == len(content)
    assert out["content"].encode("latin-1") == content
    assert out["fields"] == {"title": "a file"}


def test_json(flask_server):
    r = flask_server.post("/json", json={"b": [1, 2], "a": {"nested": True}})
    assert r.status_code == 200
    assert r.json() == {"got": {"b": [1, 2], "a": {"nested": True}}, "keys": ["a", "b"]}


def test_streaming_with_context(flask_server):
    with flask_server.raw() as c:
        r = c.request("GET", "/stream?n=3&word=row")
    assert r.status == 200
    assert r.framing == "chunked"
    assert r.body == b"row 0\nrow 1\nrow 2\n"


def test_cookies(flask_server):
    r = flask_server.get("/set-cookie")
    assert r.status_code == 200
    set_cookie = r.headers["set-cookie"]
    assert "flavour=oatmeal" in set_cookie
    assert "HttpOnly" in set_cookie
    r = flask_server.get("/get-cookie", headers={"Cookie": "flavour=oatmeal; other=1"})
    assert r.json() == {"flavour": "oatmeal"}


def test_404_handler(flask_server):
    r = flask_server.get("/no/such/page")
    assert r.status_code == 404
    assert r.json() == {"custom_404": "/no/such/page"}


def test_error_handler(flask_server):
    r = flask_server.get("/boom")
    assert r.status_code == 409
    assert r.json() == {"handled": "the handler should catch this"}


def test_unhandled_error_is_500_and_server_keeps_serving(flask_server):
    assert flask_server.get("/unhandled").status_code == 500
    assert flask_server.get("/").text == "hello, flask"


def test_remote_addr(flask_server):
    assert flask_server.get("/remote").json() == {"remote_addr": "127.0.0.1", "scheme": "http", "is_secure": False}


UPLOAD = bytes(range(256)) * 400  # 100 KiB with every byte value


def test_chunked_upload_reaches_the_view_whole(flask_server):
    # Werkzeug reads a body without Content-Length only when the server says
    # wsgi.input ends by itself (wsgi.input_terminated); otherwise the view gets b"".
    with flask_server.raw() as c:
        c.send_chunked("/echo", UPLOAD)
        r = c.read_response()
    assert r.status == 200
    assert r.body == UPLOAD


def test_reason_phrase_goes_out_as_the_application_gave_it(flask_server):
    with flask_server.raw() as c:
        r = c.request("GET", "/go")
    assert r.raw_head.startswith(b"HTTP/1.1 302 FOUND\r\n")
