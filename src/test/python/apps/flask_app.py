"""A Flask application for Peregrine's end-to-end tests."""

from flask import Flask, Response, jsonify, redirect, request, stream_with_context

app = Flask(__name__)


class Handled(Exception):
    pass


@app.get("/")
def index():
    return "hello, flask"


@app.post("/form")
def form():
    return jsonify({"form": request.form.to_dict(flat=False), "content_type": request.mimetype})


@app.post("/upload")
def upload():
    f = request.files["document"]
    data = f.read()
    return jsonify(
        {
            "filename": f.filename,
            "size": len(data),
            "content": data.decode("latin-1"),
            "fields": request.form.to_dict(),
        }
    )


@app.get("/go")
def go():
    return redirect("/")  # Werkzeug's status for it is "302 FOUND"


@app.post("/echo")
def echo():
    return Response(request.get_data(), mimetype="application/octet-stream")


@app.post("/json")
def json_echo():
    payload = request.get_json()
    return jsonify({"got": payload, "keys": sorted(payload) if isinstance(payload, dict) else None})


@app.get("/stream")
def stream():
    n = int(request.args.get("n", "3"))

    def gen():
        # request is still usable inside the generator thanks to stream_with_context
        for i in range(n):
            yield "%s %d\n" % (request.args.get("word", "line"), i)

    return Response(stream_with_context(gen()), mimetype="text/plain")


@app.get("/set-cookie")
def set_cookie():
    resp = Response("cookie set")
    resp.set_cookie("flavour", "oatmeal", httponly=True)
    return resp


@app.get("/get-cookie")
def get_cookie():
    return jsonify({"flavour": request.cookies.get("flavour")})


@app.get("/boom")
def boom():
    raise Handled("the handler should catch this")


@app.get("/unhandled")
def unhandled():
    raise RuntimeError("not handled by any error handler")


@app.errorhandler(Handled)
def handle_handled(exc):
    return jsonify({"handled": str(exc)}), 409


@app.errorhandler(404)
def not_found(exc):
    return jsonify({"custom_404": request.path}), 404


@app.get("/remote")
def remote():
    return jsonify(
        {"remote_addr": request.remote_addr, "scheme": request.scheme, "is_secure": request.is_secure}
    )


@app.get("/client")
def client():
    # What Flask derives from the environ: REMOTE_ADDR and wsgi.url_scheme (forwarded headers, request id).
    return jsonify(
        {
            "remote_addr": request.remote_addr,
            "is_secure": request.is_secure,
            "scheme": request.scheme,
            "request_id": request.headers.get("X-Request-ID"),
            "request_start": request.headers.get("X-Request-Start"),
        }
    )
