"""A plain WSGI (PEP 3333) application for Peregrine's end-to-end tests.

Written against PEP 3333 only, so that the same application runs on Peregrine
and on gunicorn (the reference server the tests are validated against).

Routes (by PATH_INFO):

  /                        "hello, wsgi"
  /environ[/anything]      JSON of the environ's str/int/bool/tuple values, plus
                           "_meta" (what wsgi.input / wsgi.errors offer, the types
                           of the CGI variables) and "_body" (the request body)
  /echo?mode=M             echoes wsgi.input; M = cl (read(CONTENT_LENGTH), the
                           default when there is one), all (read()), pieces
                           (read(1000) until b""), iter (iterate the stream)
  /readline?mode=M         JSON list of what M returned: readline (readline()
                           until b""), readlines, iter, mixed (readline() + read())
  /write                   the legacy write() callable plus a returned iterable
  /write-wait?marker=F     write(b"first\\n"), waits for file F, returns the rest
  /stream?n=K&delay=D      a generator of K blocks with a close() that counts
  /stream-wait?marker=F    yields "first\\n", waits for file F, yields the rest
  /empty-blocks            an iterator yielding a, "", b, "", c
  /closed-count            JSON of the close() counters
  /file?size=N             wsgi.file_wrapper around a BytesIO of N bytes
  /exc-info?mode=M         before: start_response again with exc_info before any
                           output; after: the same after output (must re-raise);
                           twice: a second start_response without exc_info
  /exc-status              JSON of what /exc-info recorded
  /error                   raises
  /content-length-short    declares Content-Length 10, yields 5 bytes
  /content-length-long     declares Content-Length 5, yields 10 bytes
  /list                    a two-element list and no Content-Length
  /lazy-start              start_response called inside the first iteration
  /errors-write?token=T    writes T to wsgi.errors
  /crlf-header             a header value containing CR LF
  /status/{code}           that status
  /barrier?id=X&n=N        returns once N requests with id X are in the app at once
  /seen                    JSON list of every request target served
  /sleep?s=F               sleeps F seconds
  /wait?marker=F           waits for file F (10 s at most) before any output, then "seen-marker"
  /validated/...           the same application wrapped by wsgiref.validate
  /validator-warnings      warnings wsgiref.validate issued so far
"""

import io
import json
import os
import sys
import threading
import time
import warnings
from urllib.parse import parse_qs
from wsgiref.validate import validator

SEEN = []
CLOSE_COUNT = {"stream": 0, "file": 0}
EXC_STATUS = {}
VALIDATOR_WARNINGS = []
BARRIERS = {}
BARRIERS_LOCK = threading.Lock()


def _query(environ):
    return {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}


def _respond(start_response, status, body, content_type="text/plain; charset=utf-8", headers=()):
    if isinstance(body, str):
        body = body.encode("utf-8")
    start_response(
        status,
        [("Content-Type", content_type), ("Content-Length", str(len(body)))] + list(headers),
    )
    return [body]


def _json(start_response, obj, status="200 OK"):
    return _respond(start_response, status, json.dumps(obj), "application/json")


def _wait_for(marker, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(marker):
            return b"seen-marker"
        time.sleep(0.02)
    return b"timeout"


def _read_declared(environ):
    stream = environ["wsgi.input"]
    length = environ.get("CONTENT_LENGTH", "")
    if length:
        return stream.read(int(length))
    return stream.read()


class ClosingIterable:
    """An iterable whose close() is counted, around a generator."""

    def __init__(self, gen, key):
        self.gen = gen
        self.key = key

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.gen)

    def close(self):
        CLOSE_COUNT[self.key] += 1
        self.gen.close()


class TrackedBytesIO(io.BytesIO):
    def close(self):
        if not self.closed:
            CLOSE_COUNT["file"] += 1
        super().close()


def _environ_json(environ):
    out = {}
    for key, value in environ.items():
        if isinstance(value, (str, int, bool, float)):
            out[key] = value
        elif isinstance(value, tuple):
            out[key] = list(value)
    stream = environ.get("wsgi.input")
    errors = environ.get("wsgi.errors")
    out["_meta"] = {
        "input_methods": sorted(
            m for m in ("read", "readline", "readlines", "__iter__") if hasattr(stream, m)
        ),
        "errors_methods": sorted(m for m in ("write", "writelines", "flush") if hasattr(errors, m)),
        "file_wrapper_callable": callable(environ.get("wsgi.file_wrapper")),
        "version_type": type(environ.get("wsgi.version")).__name__,
        "non_str_cgi_keys": sorted(
            k for k, v in environ.items() if "." not in k and not isinstance(v, str)
        ),
        "non_str_keys": sorted(repr(k) for k in environ if not isinstance(k, str)),
    }
    out["_body"] = _read_declared(environ).decode("latin-1")
    return out


# One large bytes object sent by /lent: /lent-refcount shows whether the server still holds references to it.
LENT = bytes(range(256)) * 4096


def app(environ, start_response):
    target = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    if environ.get("QUERY_STRING"):
        target += "?" + environ["QUERY_STRING"]
    SEEN.append(target)
    path = environ.get("PATH_INFO", "") or "/"
    query = _query(environ)

    if path == "/":
        return _respond(start_response, "200 OK", "hello, wsgi")

    if path == "/environ" or path.startswith("/environ/"):
        return _json(start_response, _environ_json(environ))

    if path == "/echo":
        stream = environ["wsgi.input"]
        mode = query.get("mode", "cl" if environ.get("CONTENT_LENGTH") else "all")
        if mode == "cl":
            body = stream.read(int(environ["CONTENT_LENGTH"]))
        elif mode == "all":
            body = stream.read()
        elif mode == "pieces":
            parts = []
            while True:
                piece = stream.read(1000)
                if not piece:
                    break
                parts.append(piece)
            body = b"".join(parts)
        elif mode == "iter":
            body = b"".join(stream)
        else:
            return _respond(start_response, "400 Bad Request", "bad mode")
        return _respond(start_response, "200 OK", body, "application/octet-stream")

    if path == "/readline":
        stream = environ["wsgi.input"]
        mode = query.get("mode", "readline")
        if mode == "readline":
            lines = []
            while True:
                line = stream.readline()
                if not line:
                    break
                lines.append(line)
        elif mode == "readlines":
            lines = stream.readlines()
        elif mode == "iter":
            lines = list(stream)
        elif mode == "mixed":
            first = stream.readline()
            lines = [first, stream.read()]
        else:
            return _respond(start_response, "400 Bad Request", "bad mode")
        after = stream.read(10)
        return _json(
            start_response,
            {
                "lines": [bytes(x).decode("latin-1") for x in lines],
                "types": sorted({type(x).__name__ for x in lines}),
                "after_eof": bytes(after).decode("latin-1"),
            },
        )

    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"part1;")
        write(b"part2;")
        return [b"end"]

    if path == "/write-wait":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"first\n")
        return [b"second: " + _wait_for(query["marker"]) + b"\n"]

    if path == "/stream":
        n = int(query.get("n", "5"))
        delay = float(query.get("delay", "0"))

        def gen():
            for i in range(n):
                yield b"chunk %d\n" % i
                if delay:
                    time.sleep(delay)

        start_response("200 OK", [("Content-Type", "text/plain")])
        return ClosingIterable(gen(), "stream")

    if path == "/stream-wait":
        marker = query["marker"]

        def gen():
            yield b"first\n"
            yield b"second: " + _wait_for(marker) + b"\n"

        start_response("200 OK", [("Content-Type", "text/plain")])
        return gen()

    if path == "/empty-blocks":
        # empty blocks in the middle must not end the response
        start_response("200 OK", [("Content-Type", "text/plain")])
        return iter([b"a", b"", b"b", b"", b"c"])

    if path == "/closed-count":
        return _json(start_response, CLOSE_COUNT)

    if path == "/file":
        size = int(query.get("size", "100000"))
        data = bytes(i % 251 for i in range(size))
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](TrackedBytesIO(data), 8192)

    if path == "/exc-info":
        mode = query.get("mode", "before")
        if mode == "before":
            start_response("200 OK", [("Content-Type", "text/plain"), ("X-First", "1")])
            try:
                raise ValueError("failure before output")
            except ValueError:
                start_response(
                    "500 Internal Server Error",
                    [("Content-Type", "text/plain"), ("X-Second", "1")],
                    sys.exc_info(),
                )
            return [b"error page"]
        if mode == "after":

            def gen():
                start_response("200 OK", [("Content-Type", "text/plain")])
                yield b"partial;"
                try:
                    raise ValueError("failure after output")
                except ValueError:
                    try:
                        start_response(
                            "500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info()
                        )
                    except ValueError:
                        EXC_STATUS["after"] = "reraised"
                        raise
                    EXC_STATUS["after"] = "returned"
                yield b"should not be sent"

            return gen()
        if mode == "twice":
            start_response("200 OK", [("Content-Type", "text/plain")])
            try:
                start_response("201 Created", [("Content-Type", "text/plain")])
            except Exception as e:  # PEP 3333: a fatal error the server must raise
                EXC_STATUS["twice"] = type(e).__name__
                return [b"raised"]
            EXC_STATUS["twice"] = "accepted"
            return [b"accepted"]
        return _respond(start_response, "400 Bad Request", "bad mode")

    if path == "/exc-status":
        return _json(start_response, EXC_STATUS)

    if path == "/error":
        raise RuntimeError("boom in wsgi app")

    if path == "/content-length-short":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "10")])
        return [b"12345"]

    if path == "/content-length-long":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
        return [b"0123456789"]

    if path == "/list":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"hello ", b"list"]

    if path == "/lent":
        # LENT itself, N times: as a list, or through write() with ?how=write, or from a generator with ?how=iter
        n, how = int(query.get("n", "1")), query.get("how", "list")
        write = start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(n * len(LENT)))])
        if how == "write":
            for _ in range(n):
                write(LENT)
            return []
        if how == "iter":
            return (LENT for _ in range(n))
        return [LENT] * n

    if path == "/lent-refcount":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(sys.getrefcount(LENT)).encode()]

    if path == "/lazy-start":

        def gen():
            start_response("200 OK", [("Content-Type", "text/plain"), ("X-Lazy", "yes")])
            yield b"lazy "
            yield b"body"

        return gen()

    if path == "/errors-write":
        errors = environ["wsgi.errors"]
        errors.write(query.get("token", "wsgi-errors-token") + "\n")
        errors.flush()
        return _respond(start_response, "200 OK", "written")

    if path == "/crlf-header":
        try:
            start_response(
                "200 OK",
                [("Content-Type", "text/plain"), ("X-Bad", "value\r\nX-Injected: yes"), ("Content-Length", "2")],
            )
        except Exception:
            EXC_STATUS["crlf"] = "start_response-raised"
            raise
        EXC_STATUS["crlf"] = "start_response-accepted"
        return [b"ok"]

    if path == "/reason":
        # the status "200 " + ?r=..., to see the reason phrase go out as given (or refused)
        return _respond(start_response, "200 " + query.get("r", ""), "reason")

    if path.startswith("/status/"):
        code = int(path[len("/status/"):])
        if code in (204, 304):
            start_response("%d No Body" % code, [])
            return []
        return _respond(start_response, "%d Status" % code, "status %d" % code)

    if path == "/barrier":
        # returns only once `n` requests with the same id are inside the
        # application at the same time (or after 10 s: "broken")
        key = query.get("id", "default")
        with BARRIERS_LOCK:
            barrier = BARRIERS.setdefault(key, threading.Barrier(int(query.get("n", "2")), timeout=10))
        try:
            barrier.wait()
            outcome = "passed"
        except threading.BrokenBarrierError:
            outcome = "broken"
        return _respond(start_response, "200 OK", outcome)

    if path == "/seen":
        return _json(start_response, SEEN)

    if path == "/wait":
        return _respond(start_response, "200 OK", _wait_for(query["marker"]).decode())

    if path == "/sleep":
        time.sleep(float(query.get("s", "1")))
        return _respond(start_response, "200 OK", "slept")

    if path == "/validated" or path.startswith("/validated/"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = VALIDATED(environ, start_response)
        VALIDATOR_WARNINGS.extend(str(w.message) for w in caught)
        return result

    if path == "/validator-warnings":
        return _json(start_response, VALIDATOR_WARNINGS)

    return _respond(start_response, "404 Not Found", "not found: " + path)


def _validated_inner(environ, start_response):
    """Written to satisfy wsgiref.validate: read() always gets a size, every
    response has a Content-Type."""
    path = environ["PATH_INFO"][len("/validated"):] or "/"
    if path == "/":
        body = b"hello, validated"
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/echo":
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [body]
    if path == "/lines":
        stream = environ["wsgi.input"]
        first = stream.readline()
        rest = stream.readlines()
        body = json.dumps([first.decode("latin-1")] + [x.decode("latin-1") for x in rest]).encode()
        start_response("200 OK", [("Content-Type", "application/json")])
        return [body]
    if path == "/stream":

        def gen():
            for i in range(3):
                yield b"chunk %d\n" % i

        start_response("200 OK", [("Content-Type", "text/plain")])
        return ClosingIterable(gen(), "stream")
    if path == "/write":
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"written;")
        return [b"returned"]
    if path == "/file":
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return environ["wsgi.file_wrapper"](io.BytesIO(b"x" * 20000), 4096)
    if path == "/errors":
        environ["wsgi.errors"].write("validated errors stream\n")
        environ["wsgi.errors"].writelines(["line one\n", "line two\n"])
        environ["wsgi.errors"].flush()
        start_response("204 No Content", [])
        return []
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]


VALIDATED = validator(_validated_inner)
