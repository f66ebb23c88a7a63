"""Applications that break the ASGI or WSGI rules, one mistake per path, for the failure-mode tests.

Every path not listed answers 200 "fine", so a test can check that the worker goes on serving.
"""

START = {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]}


async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    path = scope["path"]
    if path == "/body-before-start":
        await send({"type": "http.response.body", "body": b"early"})
    elif path == "/start-twice":
        await send(START)
        await send(START)
    elif path == "/send-after-end":
        await send(START)
        await send({"type": "http.response.body", "body": b"done"})
        await send({"type": "http.response.body", "body": b"more"})
    elif path == "/no-answer":
        return
    elif path == "/str-body":
        await send(START)
        await send({"type": "http.response.body", "body": "text, not bytes"})
    elif path == "/status-str":
        await send({"type": "http.response.start", "status": "200", "headers": []})
    elif path == "/status-invalid":
        await send({"type": "http.response.start", "status": 42, "headers": []})
    elif path == "/header-int":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-count", 3)]})
    elif path == "/header-not-pair":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-a", b"1", b"2")]})
    elif path == "/unknown-message":
        await send({"type": "http.response.teapot"})
    else:
        await send(START)
        await send({"type": "http.response.body", "body": b"fine"})


def wsgi(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/not-iterable":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return 42
    if path == "/str-chunks":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return ["text, not bytes"]
    if path == "/start-twice":
        start_response("200 OK", [("Content-Type", "text/plain")])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"twice"]
    if path == "/over-length":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
        return [b"four", b"and more"]
    if path == "/no-start":
        return [b"never started"]
    if path == "/bad-status":
        start_response("OK", [])
        return [b""]
    if path == "/header-int":
        start_response("200 OK", [("X-Count", 3)])
        return [b""]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "4")])
    return [b"fine"]
