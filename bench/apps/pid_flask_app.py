"""The Flask hello app of flask_app.py, with the pid of the process that answered in an `X-Worker-Pid` header
on every response: bench/respawn tells from it which worker served a request."""
import os

from flask_app import app


@app.after_request
def name_the_worker(response):
    # Read per request, not once at import: a server that imports the application before it forks would
    # otherwise name its parent.
    response.headers["X-Worker-Pid"] = str(os.getpid())
    return response
