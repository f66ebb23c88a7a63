"""What the three workload applications share: the rules of the TechEmpower test types that are not about
a framework, and where the database is.

- BENCH_PG_DSN: the PostgreSQL to use (bench/lib/postgres.py starts one and sets it);
- BENCH_PG_POOL_SIZE: connections of FastAPI's asyncpg pool, per worker process.
"""
import os
import random
from operator import attrgetter
from pathlib import Path

try:  # orjson when installed (the bench venv has it), else the standard library
    import orjson

    def dumps(value) -> bytes:
        return orjson.dumps(value)
except ImportError:  # pragma: no cover - depends on the venv
    import json

    def dumps(value) -> bytes:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

TEMPLATES = Path(__file__).resolve().parent / "templates"
HELLO = "Hello, World!"
WORLD_ROWS = 10_000
MAX_QUERIES = 500
ADDED_FORTUNE = "Additional fortune added at request time."
by_message = attrgetter("message")


def dsn() -> str:
    return os.environ.get("BENCH_PG_DSN", "postgresql://bench@127.0.0.1:5432/hello_world")


def pool_size(default: int) -> int:
    return int(os.environ.get("BENCH_PG_POOL_SIZE") or default)


def query_count(raw) -> int:
    """The `queries` parameter: an integer clamped to 1..500; absent, empty or not an integer counts as 1."""
    try:
        n = int(raw)
    except (TypeError, ValueError):
        return 1
    return 1 if n < 1 else MAX_QUERIES if n > MAX_QUERIES else n


def random_id() -> int:
    return random.randint(1, WORLD_ROWS)


def random_number() -> int:
    return random.randint(1, WORLD_ROWS)


def distinct_ids(n: int) -> list[int]:
    """n different random ids, for /updates: one request never writes the same row twice, so that what it
    answers is what the table holds after it, whatever order the batch applies its rows in."""
    return random.sample(range(1, WORLD_ROWS + 1), n)
