"""The objects of the application's start are frozen out of Python's full collections (gc.freeze()) once
it has started, after the garbage among them is collected; --no-gc-freeze and PEREGRINE_NO_GC_FREEZE
leave them to the collector. Objects made while serving stay collectable either way."""

import pytest

pytestmark = pytest.mark.peregrine_only

PROTOCOLS = [("gc_freeze_app:app", "asgi"), ("gc_freeze_app:wsgi_app", "wsgi")]


@pytest.mark.parametrize("target,kind", PROTOCOLS, ids=["asgi", "wsgi"])
def test_the_objects_of_the_start_are_frozen_after_the_garbage_is_collected(start_server, target, kind):
    report = start_server(target, kind=kind).get("/gc").json()
    # A FastAPI import alone leaves tens of thousands of objects; this bare module and the server's glue some thousands.
    assert report["freeze_count"] > 1000, report
    assert report["import_object_frozen"] is True, report
    assert report["import_garbage_gone"] is True, report
    assert report["request_object_frozen"] is False, report
    if kind == "asgi":
        assert report["startup_object_frozen"] is True, report
        assert report["startup_garbage_gone"] is True, report


@pytest.mark.parametrize("how", ["option", "environment"])
def test_no_gc_freeze_leaves_the_collector_as_python_sets_it(start_server, how):
    if how == "option":
        server = start_server("gc_freeze_app:app", "--no-gc-freeze", kind="asgi")
    else:
        server = start_server("gc_freeze_app:app", kind="asgi", env={"PEREGRINE_NO_GC_FREEZE": "true"})
    report = server.get("/gc").json()
    assert report["freeze_count"] == 0, report
    assert report["import_object_frozen"] is False, report
    assert report["startup_object_frozen"] is False, report
