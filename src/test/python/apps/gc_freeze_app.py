"""ASGI (app) and WSGI (wsgi_app) applications that report what Python's collector holds of their objects.

GET /gc answers JSON:
  freeze_count        gc.get_freeze_count(): objects in the permanent generation
  import_garbage_gone a reference cycle dropped at the end of the import has been collected
  startup_garbage_gone (ASGI) the same for a cycle dropped at the end of the lifespan startup
  import_object_frozen   an object made at import is out of the collected generations
  startup_object_frozen  (ASGI) the same for an object made in the lifespan startup
  request_object_frozen  the same for an object made by this request (never: it comes after the start)
"""

import gc
import json
import weakref


class Marker:
    pass


def dropped_cycle():
    """A reference cycle nobody holds: only the cyclic collector can free it. Returns a weak reference to it."""
    a, b = Marker(), Marker()
    a.other, b.other = b, a
    return weakref.ref(a)


def frozen(obj):
    return not any(o is obj for o in gc.get_objects())


IMPORT_OBJECT = Marker()
STARTUP = {}


def report(request_object):
    result = {
        "freeze_count": gc.get_freeze_count(),
        "import_garbage_gone": IMPORT_GARBAGE() is None,
        "import_object_frozen": frozen(IMPORT_OBJECT),
        "request_object_frozen": frozen(request_object),
    }
    if STARTUP:
        result["startup_garbage_gone"] = STARTUP["garbage"]() is None
        result["startup_object_frozen"] = frozen(STARTUP["object"])
    return json.dumps(result).encode()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                STARTUP["object"] = Marker()
                STARTUP["garbage"] = dropped_cycle()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = report(Marker())
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def wsgi_app(environ, start_response):
    body = report(Marker())
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]


IMPORT_GARBAGE = dropped_cycle()
