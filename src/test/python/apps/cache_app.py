"""ASGI application for the response cache tests (test_cache.py).

Every route answers with headers chosen by the query:
  cc=V          Cache-Control: V             vary=V      Vary: V
  expires=N     Expires: now + N seconds ("bad": an invalid date)
  cookie=1      a Set-Cookie                 etag=V      ETag: "V"
  lastmod=1     a fixed Last-Modified        age=N       Age: N
  status=N      the status (default 200)     sleep=F     sleeps F seconds first (asyncio)
  size=N        a body of N bytes            stream=N    the body in N chunks without Content-Length
The body (unless size is given) says the method, path, query, the Accept-Language and a call number;
the X-Pid header is the worker's process id. Each call appends "METHOD TARGET PID" to the file named by
CACHE_APP_LOG, so that a test counts the application calls of every worker.
"""

import asyncio
import email.utils
import os
import time
from urllib.parse import parse_qs

CALLS = [0]


def _log(method, target):
    log = os.environ.get("CACHE_APP_LOG")
    if log:
        with open(log, "a") as f:
            f.write("%s %s %d\n" % (method, target, os.getpid()))


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    query_string = scope["query_string"].decode()
    query = {k: v[0] for k, v in parse_qs(query_string).items()}
    target = scope["path"] + ("?" + query_string if query_string else "")
    _log(scope["method"], target)
    CALLS[0] += 1
    if "sleep" in query:
        await asyncio.sleep(float(query["sleep"]))
    request_headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    headers = [(b"x-pid", str(os.getpid()).encode()), (b"content-type", b"text/plain")]
    if "cc" in query:
        headers.append((b"cache-control", query["cc"].encode()))
    if "vary" in query:
        headers.append((b"vary", query["vary"].encode()))
    if "expires" in query:
        value = "not a date" if query["expires"] == "bad" else email.utils.formatdate(time.time() + int(query["expires"]), usegmt=True)
        headers.append((b"expires", value.encode()))
    if query.get("cookie"):
        headers.append((b"set-cookie", b"session=1"))
    if "etag" in query:
        headers.append((b"etag", ('"%s"' % query["etag"]).encode()))
    if query.get("lastmod"):
        headers.append((b"last-modified", b"Wed, 21 Oct 2015 07:28:00 GMT"))
    if "age" in query:
        headers.append((b"age", query["age"].encode()))
    if "size" in query:
        body = b"x" * int(query["size"])
    else:
        body = ("%s %s lang=%s call=%d" % (scope["method"], target, request_headers.get("accept-language", ""), CALLS[0])).encode()
    status = int(query.get("status", "200"))
    if status in (204, 304):
        body = b""
    chunks = int(query.get("stream", "0"))
    if not chunks:
        headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    if chunks:
        step = max(1, len(body) // chunks)
        for i in range(0, len(body), step):
            await send({"type": "http.response.body", "body": body[i:i + step], "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    else:
        await send({"type": "http.response.body", "body": body})
