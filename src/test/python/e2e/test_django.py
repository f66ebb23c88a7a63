"""Django on Peregrine, through its WSGI handler and through its ASGI handler
(which does not implement lifespan, so it is also a real-world case of an
application without lifespan support)."""

import pytest

TARGETS = {"wsgi": "django_app.wsgi:application", "asgi": "django_app.asgi:application"}


@pytest.fixture(scope="module", params=["wsgi", "asgi"])
def django_server(request, start_module_server):
    return start_module_server(TARGETS[request.param], kind=request.param)


def test_path_and_method(django_server):
    r = django_server.get("/info/a/b?x=1")
    assert r.status_code == 200
    assert r.json() == {"path": "/info/a/b", "method": "GET", "query": {"x": "1"}, "script_name": ""}


def test_other_method(django_server):
    r = django_server.request("DELETE", "/")
    assert r.json()["method"] == "DELETE"
    assert r.json()["path"] == "/"


def test_post_data(django_server):
    r = django_server.post("/post", data={"name": "Grace", "lang": ["COBOL", "FLOW-MATIC"]})
    assert r.status_code == 200
    assert r.json() == {
        "method": "POST",
        "post": {"name": ["Grace"], "lang": ["COBOL", "FLOW-MATIC"]},
        "content_type": "application/x-www-form-urlencoded",
    }


def test_404(django_server):
    assert django_server.get("/no/such/url").status_code == 404


BYTE_VALUES = bytes(range(256))


# 100 KiB is held in memory until it ends; 2 MiB goes past that, to a temporary file (and stays under
# Django's own DATA_UPLOAD_MAX_MEMORY_SIZE of 2.5 MiB for request.body).
@pytest.mark.peregrine_only  # Django reads CONTENT_LENGTH bytes only: on gunicorn a chunked body is empty
@pytest.mark.parametrize("size", [100 << 10, 2 << 20])
def test_chunked_upload_reaches_request_body_whole(django_server, size):
    upload = BYTE_VALUES * (size // len(BYTE_VALUES))
    with django_server.raw(timeout=30) as c:
        c.send_chunked("/echo", upload, piece=64 << 10)
        r = c.read_response()
    assert r.status == 200
    assert r.body == upload
