"""The TechEmpower test types of bench/workloads (FastAPI + asyncpg, Flask + psycopg, Django's ORM) on
Peregrine against a real PostgreSQL (bench/lib/postgres.py, started once for the module), checked with the
benchmark's validation rules: shapes and types of the JSON, Content-Type, the clamping of `queries`, the
fortunes page (13 rows sorted by message, the added one, markup escaped, UTF-8 intact) and updates that
the database holds afterwards (read back through psycopg)."""

import html.parser
import importlib.util
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import REPO_ROOT

# asyncpg and psycopg-binary have wheels for CPython 3.11 only on this machine's mirror (and the
# requirements install them only below 3.13).
if sys.version_info >= (3, 12):
    pytest.skip("asyncpg and psycopg-binary have no wheels for this CPython on this machine's mirror",
                allow_module_level=True)
pytest.importorskip("asyncpg")
pytest.importorskip("flask")
psycopg = pytest.importorskip("psycopg")

WORKLOADS = REPO_ROOT / "bench" / "workloads"
_spec = importlib.util.spec_from_file_location("bench_postgres", REPO_ROOT / "bench" / "lib" / "postgres.py")
bench_postgres = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_postgres)

if bench_postgres.bin_dir() is None:
    pytest.skip("PostgreSQL's server binaries are absent (bin/test installs Debian's postgresql)",
                allow_module_level=True)

TARGETS = {"fastapi": "fastapi_app:app", "flask": "flask_app:app", "django": "django_app.wsgi:application"}
ADDED = "Additional fortune added at request time."
SCRIPT = '<script>alert("This should not be displayed in a browser alert box.");</script>'
JAPANESE = "フレームワークのベンチマーク"


@pytest.fixture(scope="module")
def database():
    with bench_postgres.Postgres(max_connections=50) as pg:
        yield pg


@pytest.fixture(scope="module")
def db(database):
    with psycopg.connect(database.dsn, autocommit=True) as conn:
        yield conn


@pytest.fixture(scope="module", params=list(TARGETS))
def app(request, database, start_module_server):
    # Two WSGI threads: each holds a connection of its own (flask_app.py, Django's persistent connections).
    return start_module_server(TARGETS[request.param], "--python-path", str(WORKLOADS), "--wsgi-threads", "2",
                               env={"BENCH_PG_DSN": database.dsn, "BENCH_PG_POOL_SIZE": "4"},
                               kind="asgi" if request.param == "fastapi" else "wsgi")


def world(db, ids):
    """{id: randomnumber} of those rows, as the database holds them now."""
    return dict(db.execute("SELECT id, randomnumber FROM World WHERE id = ANY(%s)", (list(ids),)).fetchall())


def whole_world(db):
    return dict(db.execute("SELECT id, randomnumber FROM World").fetchall())


def get_json(app, path):
    r = app.get(path)
    assert r.status_code == 200, r.text[:500]
    assert r.headers["content-type"].split(";")[0].strip() == "application/json"
    return json.loads(r.content)


def assert_world_row(row):
    assert isinstance(row, dict) and set(row) == {"id", "randomNumber"}, row
    assert type(row["id"]) is int and type(row["randomNumber"]) is int, row
    assert 1 <= row["id"] <= 10000 and 1 <= row["randomNumber"] <= 10000, row


def test_json(app):
    assert get_json(app, "/json") == {"message": "Hello, World!"}


def test_plaintext(app):
    r = app.get("/plaintext")
    assert r.status_code == 200
    assert r.headers["content-type"].split(";")[0].strip() == "text/plain"
    assert r.content == b"Hello, World!"


def test_db_reads_a_random_row(app, db):
    rows = [get_json(app, "/db") for _ in range(10)]
    for row in rows:
        assert_world_row(row)
    assert world(db, [r["id"] for r in rows]) == {r["id"]: r["randomNumber"] for r in rows}
    assert len({r["id"] for r in rows}) > 1, "ten requests read the same row: the id is not random"


@pytest.mark.parametrize("query, count", [("?queries=20", 20), ("?queries=1", 1), ("?queries=0", 1),
                                          ("?queries=-5", 1), ("?queries=501", 500), ("?queries=foo", 1),
                                          ("?queries=", 1), ("", 1)])
def test_queries(app, db, query, count):
    rows = get_json(app, "/queries" + query)
    assert isinstance(rows, list) and len(rows) == count
    for row in rows:
        assert_world_row(row)
    assert world(db, [r["id"] for r in rows]) == {r["id"]: r["randomNumber"] for r in rows}
    if count >= 20:
        assert len({r["id"] for r in rows}) > 1


class FortuneTable(html.parser.HTMLParser):
    """The page's tags in order, and the text of each table cell (entities decoded)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.rows, self.title = [], [], ""
        self._cell = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self._in_title = tag == "title"
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ""

    def handle_endtag(self, tag):
        self._in_title = False
        if tag in ("td", "th"):
            self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        elif self._in_title:
            self.title += data


def test_fortunes(app):
    r = app.get("/fortunes")
    assert r.status_code == 200
    assert r.headers["content-type"].replace(" ", "").lower() == "text/html;charset=utf-8"
    page = r.content.decode("utf-8")
    assert page.lstrip().lower().startswith("<!doctype html>")
    # The script fortune comes out escaped (no markup of its own), the Japanese one as UTF-8 (no entities).
    assert "<script" not in page and "&lt;script&gt;" in page
    assert JAPANESE.encode() in r.content
    table = FortuneTable()
    table.feed(page)
    table.close()
    assert table.title == "Fortunes"
    assert [t for t in table.tags if t not in ("tr", "td", "th")] == ["html", "head", "title", "body", "table"]
    assert table.rows[0] == ["id", "message"]
    fortunes = [(int(i), message) for i, message in table.rows[1:]]
    expected = sorted([(i, m) for i, m in bench_postgres.FORTUNES] + [(0, ADDED)], key=lambda f: f[1])
    assert fortunes == expected
    assert (0, ADDED) in fortunes and (11, SCRIPT) in fortunes and (12, JAPANESE) in fortunes


@pytest.mark.parametrize("query, count", [("?queries=20", 20), ("?queries=0", 1), ("?queries=501", 500),
                                          ("?queries=foo", 1), ("", 1)])
def test_updates_are_persisted(app, db, query, count):
    before = whole_world(db)
    rows = get_json(app, "/updates" + query)
    assert isinstance(rows, list) and len(rows) == count
    for row in rows:
        assert_world_row(row)
    answered = {r["id"]: r["randomNumber"] for r in rows}
    after = whole_world(db)
    assert {i: after[i] for i in answered} == answered, "the numbers answered are not the ones the table holds"
    changed = {i for i in after if after[i] != before[i]}
    assert changed <= set(answered), "rows the response does not name were written"
    if count >= 20:
        assert changed, "none of the rows answered changed in the table"


def test_concurrent_updates_all_succeed(app, db):
    # Requests writing rows side by side (the batch takes its row locks in one order: no deadlock).
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: app.get("/updates?queries=50"), range(24)))
    assert [r.status_code for r in responses] == [200] * 24, [r.text[:300] for r in responses if r.status_code != 200]
    for r in responses:
        assert len(r.json()) == 50
