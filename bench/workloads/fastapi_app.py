"""The TechEmpower test types in FastAPI, with asyncpg and Jinja2 (see README.md beside this file).

Statements go through asyncpg's per-connection statement cache (prepared once per connection; an explicit
Connection.prepare() would parse again on every call).

The pool is opened in the lifespan, one per worker process, of BENCH_PG_POOL_SIZE connections (default 16:
on one event loop more connections than that only queue inside PostgreSQL)."""
from collections import namedtuple
from contextlib import asynccontextmanager

import asyncpg
import jinja2
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from workload_rules import (ADDED_FORTUNE, HELLO, TEMPLATES, by_message, distinct_ids, dsn, dumps, pool_size,
                            query_count, random_id, random_number)

READ_ROW = "SELECT id, randomnumber FROM World WHERE id = $1"
READ_FORTUNES = "SELECT id, message FROM Fortune"
WRITE_ROW = "UPDATE World SET randomnumber = $2 WHERE id = $1"

Fortune = namedtuple("Fortune", "id message")
fortunes_template = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True).get_template(
    "fortunes.html")
pool: asyncpg.Pool | None = None


class JSONResponse(Response):
    """JSON serialized by orjson when installed; FastAPI's own ORJSONResponse is deprecated."""
    media_type = "application/json"

    def render(self, content) -> bytes:
        return dumps(content)


@asynccontextmanager
async def lifespan(app):
    global pool
    size = pool_size(16)
    pool = await asyncpg.create_pool(dsn(), min_size=size, max_size=size)
    try:
        yield
    finally:
        await pool.close()


app = FastAPI(lifespan=lifespan)


@app.get("/")
async def index():
    return PlainTextResponse("ok")


@app.get("/json")
async def json_message():
    return JSONResponse({"message": HELLO})


@app.get("/plaintext")
async def plaintext():
    return PlainTextResponse(HELLO)


@app.get("/db")
async def single_query():
    async with pool.acquire() as conn:
        row = await conn.fetchrow(READ_ROW, random_id())
    return JSONResponse({"id": row[0], "randomNumber": row[1]})


@app.get("/queries")
async def multiple_queries(queries: str | None = None):
    n = query_count(queries)
    async with pool.acquire() as conn:
        worlds = []
        for _ in range(n):
            row = await conn.fetchrow(READ_ROW, random_id())
            worlds.append({"id": row[0], "randomNumber": row[1]})
    return JSONResponse(worlds)


@app.get("/fortunes")
async def fortunes():
    async with pool.acquire() as conn:
        rows = await conn.fetch(READ_FORTUNES)
    messages = [Fortune(*row) for row in rows]
    messages.append(Fortune(0, ADDED_FORTUNE))
    messages.sort(key=by_message)
    return HTMLResponse(fortunes_template.render(fortunes=messages))


@app.get("/updates")
async def updates(queries: str | None = None):
    ids = distinct_ids(query_count(queries))
    async with pool.acquire() as conn:
        worlds = []
        for world_id in ids:
            row = await conn.fetchrow(READ_ROW, world_id)
            worlds.append({"id": row[0], "randomNumber": random_number()})
        # One batch, atomic, its rows in id order: two requests writing the same rows lock them in the same
        # order and cannot deadlock.
        await conn.executemany(WRITE_ROW, sorted((w["id"], w["randomNumber"]) for w in worlds))
    return JSONResponse(worlds)
