"""bench/cache: one FastAPI route, cacheable or not by its path, as an application answers with a small JSON body."""
from fastapi import FastAPI
from fastapi.responses import JSONResponse

app = FastAPI()
ITEM = {"id": 1, "name": "widget", "tags": ["a", "b", "c"], "price": 9.99, "stock": 120}


@app.get("/")
async def index():
    return JSONResponse({}, headers={"cache-control": "no-store"})


@app.get("/cached/item")
async def cached():
    return JSONResponse(ITEM, headers={"cache-control": "public, max-age=300"})


@app.get("/cached/many/{n}")
async def cached_many(n: int):
    return JSONResponse(ITEM, headers={"cache-control": "public, max-age=300"})


@app.get("/uncached/item")
async def uncached():
    return JSONResponse(ITEM, headers={"cache-control": "no-store"})
