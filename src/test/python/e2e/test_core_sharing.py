"""--share-core: the I/O thread and the application's thread share one core while a single worker serves one
or two connections, and get back the cores they had beyond that (server.CoreSharing). Read from the
threads' Cpus_allowed_list in /proc, while real connections are open."""
import os
import re
from contextlib import ExitStack
from pathlib import Path

import pytest

from conftest import java_pid, poll

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to choose from")

ASGI, WSGI = "workers_app:app", "workers_app:wsgi"


def allowed_cpus(server, pid=None):
    """{thread id: (thread name, the CPUs it may run on)} of the server's JVM (or of the process pid)."""
    out = {}
    for task in Path(f"/proc/{pid or java_pid(server)}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            line = next(l for l in (task / "status").read_text().splitlines() if l.startswith("Cpus_allowed_list:"))
        except (OSError, StopIteration):
            continue
        out[task.name] = (name, line.split(":", 1)[1].strip())
    return out


def application_threads(server):
    return [cpus for name, cpus in allowed_cpus(server).values() if name == "python" or re.fullmatch(r"wsgi-\d+", name)]


def io_threads(server):
    return [cpus for name, cpus in allowed_cpus(server).values() if name.startswith("epollEventLoop")]


def process_cpus(server, pid=None):
    return next(l for l in Path(f"/proc/{pid or java_pid(server)}/status").read_text().splitlines()
                if l.startswith("Cpus_allowed_list:")).split(":", 1)[1].strip()


def shared_core(server):
    """The one CPU the application's thread and an I/O thread are both held to, or None."""
    (app,) = application_threads(server)
    return app if "," not in app and "-" not in app and app in io_threads(server) else None


def open_connections(server, stack, n):
    conns = [stack.enter_context(server.raw()) for _ in range(n)]
    for c in conns:
        assert c.request("GET", "/").status == 200
    return conns


@pytest.mark.parametrize("target", [ASGI, WSGI], ids=["asgi", "wsgi"])
def test_one_connection_shares_a_core_and_more_give_it_back(start_server, target):
    server = start_server(target, "--share-core")
    everything = process_cpus(server)
    assert application_threads(server) == [everything]
    with ExitStack() as stack:
        first = open_connections(server, stack, 1)[0]
        assert poll(lambda: shared_core(server), timeout=10), allowed_cpus(server)
        # the connection keeps being served from that core
        for _ in range(20):
            assert first.request("GET", "/").status == 200
        assert shared_core(server)
        open_connections(server, stack, 3)
        assert poll(lambda: application_threads(server) == [everything], timeout=10), allowed_cpus(server)
        assert everything in io_threads(server)
        assert first.request("GET", "/").status == 200
    # all closed: nothing is held to one core while the worker is idle
    assert poll(lambda: all(cpus == everything for _, cpus in allowed_cpus(server).values()), timeout=10), \
        allowed_cpus(server)


@pytest.mark.parametrize("options", [(), ("--share-core", "--wsgi-threads", "2")], ids=["not-asked", "two-wsgi-threads"])
def test_without_the_option_or_with_several_application_threads_no_core_is_shared(start_server, options):
    server = start_server(WSGI, *options)
    everything = process_cpus(server)
    with ExitStack() as stack:
        conn = open_connections(server, stack, 1)[0]
        for _ in range(20):
            assert conn.request("GET", "/").status == 200
        assert all(cpus == everything for _, cpus in allowed_cpus(server).values()), allowed_cpus(server)
    if options:
        assert "--share-core: the application runs on several threads" in server.output()
