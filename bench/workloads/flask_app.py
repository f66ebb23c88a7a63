"""The TechEmpower test types in Flask, with psycopg 3 and Jinja2 (see README.md beside this file).

One connection per thread that runs requests, opened on its first request and kept: psycopg_pool, the
usual pool of psycopg 3, is not on this machine's package mirror. Every server measured runs a fixed set of
threads (gunicorn's sync worker one, its gthread worker and Peregrine --wsgi-threads N, uvicorn's WSGI
adapter 10), so this is a pool of exactly that size, without the hand-over a shared pool costs.
"""
import threading
from collections import namedtuple

import psycopg
from flask import Flask, Response, render_template, request

from workload_rules import (ADDED_FORTUNE, HELLO, TEMPLATES, by_message, distinct_ids, dsn, dumps, query_count,
                            random_id, random_number)

READ_ROW = "SELECT id, randomnumber FROM World WHERE id = %s"
READ_FORTUNES = "SELECT id, message FROM Fortune"
WRITE_ROW = "UPDATE World SET randomnumber = %s WHERE id = %s"

Fortune = namedtuple("Fortune", "id message")
app = Flask(__name__, template_folder=str(TEMPLATES))
local = threading.local()


def connection() -> psycopg.Connection:
    conn = getattr(local, "conn", None)
    if conn is None or conn.closed:
        # prepare_threshold=0: every statement is prepared on first use, as asyncpg does.
        conn = local.conn = psycopg.connect(dsn(), autocommit=True, prepare_threshold=0)
    return conn


def json_response(value) -> Response:
    return Response(dumps(value), mimetype="application/json")


@app.get("/")
def index():
    return "ok"


@app.get("/json")
def json_message():
    return json_response({"message": HELLO})


@app.get("/plaintext")
def plaintext():
    return Response(HELLO, mimetype="text/plain")


@app.get("/db")
def single_query():
    with connection().cursor() as cur:
        world_id, number = cur.execute(READ_ROW, (random_id(),)).fetchone()
    return json_response({"id": world_id, "randomNumber": number})


@app.get("/queries")
def multiple_queries():
    n = query_count(request.args.get("queries"))
    worlds = []
    with connection().cursor() as cur:
        for _ in range(n):
            world_id, number = cur.execute(READ_ROW, (random_id(),)).fetchone()
            worlds.append({"id": world_id, "randomNumber": number})
    return json_response(worlds)


@app.get("/fortunes")
def fortunes():
    with connection().cursor() as cur:
        messages = [Fortune(*row) for row in cur.execute(READ_FORTUNES)]
    messages.append(Fortune(0, ADDED_FORTUNE))
    messages.sort(key=by_message)
    return render_template("fortunes.html", fortunes=messages)


@app.get("/updates")
def updates():
    ids = distinct_ids(query_count(request.args.get("queries")))
    worlds = []
    with connection().cursor() as cur:
        for world_id in ids:
            world_id, _ = cur.execute(READ_ROW, (world_id,)).fetchone()
            worlds.append({"id": world_id, "randomNumber": random_number()})
        # One batch (psycopg sends executemany's statements in one pipeline); in autocommit mode each row is
        # its own transaction, so concurrent requests cannot deadlock on each other's rows.
        cur.executemany(WRITE_ROW, [(w["randomNumber"], w["id"]) for w in worlds])
    return json_response(worlds)
