"""A module that fails at import time."""

raise RuntimeError("boom at import")


def app(environ, start_response):  # never reached
    start_response("200 OK", [])
    return [b""]
