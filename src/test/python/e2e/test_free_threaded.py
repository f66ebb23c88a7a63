"""Free-threaded workers (--free-threaded): worker threads of one process on a CPython built without
the GIL. Run under a free-threaded interpreter (PEREGRINE_TEST_PYTHONS="3.13t", which bin/test gets
from bin/python-build); under any other, only the refusal is tested. FastAPI and Flask have no wheels
for the free-threaded ABI on the package index, so Starlette and Django serve here."""

import os
import signal
import sysconfig
import threading

import httpx
import pytest

from conftest import assert_clean_exit, poll, run_cli
from test_workers import LoadLoop, children, rewrite, RELOAD_APP, _text

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
needs_free_threading = pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded CPython (3.13t)")

pytestmark = pytest.mark.peregrine_only  # uvicorn and gunicorn have no worker threads


def records(path):
    return path.read_text().split("\n")[:-1] if path.exists() else []


def start_threads(start_server, target, *options, env=None):
    """A --free-threaded server with a supervisor, once its worker process serves: the supervisor's
    socket accepts connections before that."""
    server = start_server(target, "--free-threaded", *options, env=env)
    assert poll(lambda: "worker threads in one process" in server.output(), timeout=60), server.output()[-3000:]
    return server


def meet_at_once(server, n):
    """n requests at once to /meet?n=N: the answers, each the name of the thread that served it."""
    answers = []

    def meet():
        answers.append(httpx.get(server.url + "/meet?n=%d" % n, timeout=30))

    clients = [threading.Thread(target=meet) for _ in range(n)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(40)
    assert [r.status_code for r in answers] == [200] * n, [r.text for r in answers]
    return [r.text for r in answers]


@pytest.mark.skipif(FREE_THREADED, reason="a free-threaded CPython is what --free-threaded asks for")
@pytest.mark.parametrize("workers", ["1", "2"])  # by the one process, and by the supervisor before any worker starts
def test_refused_on_an_interpreter_with_the_gil(workers):
    code, out = run_cli("--free-threaded", "--workers", workers, "--port", "0", "threads_app:app")
    assert code == 2, out
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[-1].startswith("peregrine: --free-threaded needs a free-threaded CPython"), out


@needs_free_threading
def test_worker_threads_serve_at_once_from_one_import(start_server, tmp_path):
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "4", env={"PEREGRINE_TEST_RECORD": str(record)})
    # Four requests that each block their thread until all four are in: answered only if four worker
    # threads run the application at the same time.
    assert len(set(meet_at_once(server, 4))) == 4
    assert records(record).count("import") == 1, records(record)
    seen = {server.get("/thread").json()["thread"] for _ in range(8)}
    assert len(seen) == 4, seen
    assert server.get("/thread").json()["gil_enabled"] is False
    # One worker process under the supervisor, the one that answers: threads, not processes.
    assert children(server.proc.pid) == [int(server.get("/pid").text)]
    assert "with 4 worker threads in one process" in server.output()


@needs_free_threading
def test_a_request_goes_to_a_free_loop_not_behind_a_blocked_one(start_server, tmp_path):
    # Taking turns would send every other request to the blocked loop, to wait there until it ends.
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "2", env={"PEREGRINE_TEST_RECORD": str(record)})
    blocked = []
    holder = threading.Thread(target=lambda: blocked.append(httpx.get(server.url + "/block?s=15", timeout=60)))
    holder.start()
    assert poll(lambda: "block" in records(record), timeout=20), records(record)
    served_by = {server.get("/thread").json()["thread"] for _ in range(6)}
    assert "unblocked" not in records(record), "the requests waited for the blocked loop"
    holder.join(60)
    assert blocked[0].status_code == 200 and len(served_by) == 1 and blocked[0].text not in served_by, (blocked[0].text, served_by)


@needs_free_threading
def test_django_wsgi_is_served_by_the_threads_of_every_worker_at_once(start_server):
    # Two worker threads of two WSGI threads each: four requests run the application at once.
    server = start_threads(start_server, "django_app.wsgi:application", "--workers", "2", "--wsgi-threads", "2")
    assert len(set(meet_at_once(server, 4))) == 4
    assert server.get("/info/x").json()["path"] == "/info/x"
    assert len(children(server.proc.pid)) == 1


@needs_free_threading
def test_lifespan_runs_per_worker_thread_on_its_loop(start_server, tmp_path):
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "3", env={"PEREGRINE_TEST_RECORD": str(record)})
    starts = [line for line in records(record) if line.startswith("startup ")]
    assert len(starts) == 3 and len(set(starts)) == 3, records(record)
    for _ in range(6):
        answer = server.get("/thread").json()
        assert answer["lifespan_thread"] == answer["thread"], answer
    assert_clean_exit(server, server.stop())
    shutdowns = sorted(line.split()[1] for line in records(record) if line.startswith("shutdown "))
    assert shutdowns == sorted(line.split()[1] for line in starts), records(record)


@needs_free_threading
def test_lifespan_scope_process_runs_once_and_shares_its_state(start_server, tmp_path):
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "3", "--lifespan-scope", "process",
                          env={"PEREGRINE_TEST_RECORD": str(record)})
    starts = [line for line in records(record) if line.startswith("startup ")]
    assert len(starts) == 1, records(record)
    answers = [server.get("/thread").json() for _ in range(6)]
    assert len({a["thread"] for a in answers}) == 3, answers
    assert {a["lifespan_thread"] for a in answers} == {starts[0].split()[1]}, answers
    assert_clean_exit(server, server.stop())
    assert [line for line in records(record) if line.startswith("shutdown ")] == ["shutdown " + starts[0].split()[1]]


@needs_free_threading
def test_sigterm_lets_requests_in_flight_on_every_thread_finish(start_server, tmp_path):
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "2", env={"PEREGRINE_TEST_RECORD": str(record)})
    answers = []

    def slow():
        answers.append(httpx.get(server.url + "/sleep?s=2", timeout=30))

    clients = [threading.Thread(target=slow) for _ in range(4)]
    for t in clients:
        t.start()
    assert poll(lambda: records(record).count("sleep") == 4, timeout=20), records(record)
    server.proc.send_signal(signal.SIGTERM)
    for t in clients:
        t.join(30)
    assert [r.text for r in answers] == ["slept"] * 4
    assert_clean_exit(server, server.stop())


@needs_free_threading
def test_sighup_under_load_replaces_the_process_refusing_and_resetting_nothing(start_server, tmp_path):
    record = tmp_path / "record.txt"
    server = start_threads(start_server, "threads_app:app", "--workers", "2", env={"PEREGRINE_TEST_RECORD": str(record)})
    first = children(server.proc.pid)
    assert len(first) == 1
    with LoadLoop(server) as load:
        assert poll(lambda: load.ok > 50, timeout=30)
        for round_ in (1, 2):
            os.kill(server.proc.pid, signal.SIGHUP)
            assert poll(lambda: server.output().count("Replaced worker") >= round_, timeout=90), server.output()[-3000:]
            served_before = load.ok
            assert poll(lambda: load.ok > served_before + 20, timeout=30)
    assert load.failures == [], load.failures[:10]
    assert poll(lambda: len(children(server.proc.pid)) == 1, timeout=30), children(server.proc.pid)
    last = children(server.proc.pid)
    assert last != first and load.pids >= set(first) | set(last), (first, last, load.pids)
    # Each process ran the lifespan on both its threads, and the replaced ones ran their shutdowns.
    assert poll(lambda: sum(line.startswith("shutdown ") for line in records(record)) == 4, timeout=30), records(record)
    assert sum(line.startswith("startup ") for line in records(record)) == 6, records(record)
    assert records(record).count("import") == 3, records(record)


@needs_free_threading
def test_reload_starts_a_new_process_on_a_source_change(start_server, tmp_path):
    source = tmp_path / "reloaded_app.py"
    source.write_text(RELOAD_APP % "one")
    server = start_threads(start_server, "reloaded_app:app", "--workers", "2", "--reload", "--python-path", str(tmp_path), "--no-lifespan")
    assert server.get("/").text == "one"
    rewrite(source, RELOAD_APP % "two")
    assert poll(lambda: _text(server) == "two", timeout=60), server.output()[-3000:]


@needs_free_threading
def test_a_killed_worker_process_is_replaced_with_all_its_threads(start_server):
    server = start_threads(start_server, "threads_app:app", "--workers", "2")
    [before] = children(server.proc.pid)
    os.kill(before, signal.SIGKILL)
    assert poll(lambda: len(children(server.proc.pid)) == 1 and children(server.proc.pid) != [before], timeout=60), server.output()[-3000:]
    assert poll(lambda: _text(server) is not None and server.get("/pid").text != str(before), timeout=60)
    assert len(set(meet_at_once(server, 2))) == 2
