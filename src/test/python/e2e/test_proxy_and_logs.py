"""Behind a proxy and in the logs: --forwarded-allow-ips (X-Forwarded-For,
X-Forwarded-Proto, Forwarded), --request-id, --trace-context,
--request-start-header and --access-log-format text|json.

The client is always 127.0.0.1, which the default list trusts; the other
cases use a list that leaves it out.  In reference mode the ASGI forwarding
cases run against uvicorn, whose proxy-headers middleware they were checked
against; everything else is peregrine_only."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from conftest import APPS_DIR, RawConn, base_env, free_port, peregrine_cmd, poll, run_cli

OPS = ("--access-log", "--request-id", "--trace-context", "--request-start-header")
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEX32 = re.compile(r"^[0-9a-f]{32}$")

# uvicorn (the ASGI reference) reads X-Forwarded-* as Peregrine does; gunicorn leaves
# REMOTE_ADDR alone, so the WSGI cases are Peregrine's own.
KINDS = ["asgi", pytest.param("wsgi", marks=pytest.mark.peregrine_only)]


def seen(server, kind, headers=(), path=None):
    """What the application saw: {"client": (host, port) or None, "scheme": str, "headers": {name: [values]}}."""
    path = path or ("/scope" if kind == "asgi" else "/environ")
    with server.client() as c:
        r = c.get(path, headers=list(headers))
    assert r.status_code == 200, r.text
    data = r.json()
    out = {"response": r}
    if kind == "asgi":
        out["client"] = tuple(data["client"]) if data["client"] else None
        out["scheme"] = data["scheme"]
        found = {}
        for name, value in data["headers"]:
            found.setdefault(name, []).append(value)
        out["headers"] = found
    else:
        out["client"] = (data["REMOTE_ADDR"], int(data["REMOTE_PORT"])) if "REMOTE_ADDR" in data else None
        out["scheme"] = data["wsgi.url_scheme"]
        out["headers"] = {
            k[5:].lower().replace("_", "-"): [v] for k, v in data.items() if k.startswith("HTTP_")
        }
    return out


def log_lines(server, needle, count=1, timeout=10):
    """The output lines containing needle, once there are count of them."""

    def matching():
        lines = [line for line in server.lines() if needle in line]
        return lines if len(lines) >= count else None

    found = poll(matching, timeout=timeout)
    assert found, "no %d access-log line(s) with %r in:\n%s" % (count, needle, server.output()[-3000:])
    return found


def probe():
    return "/probe-" + uuid.uuid4().hex[:12]


# ---------------------------------------------------------------------------
# --forwarded-allow-ips


@pytest.mark.parametrize("kind", KINDS)
def test_default_list_trusts_the_loopback_proxy(raw_servers, kind):
    server = raw_servers(kind)
    got = seen(server, kind, [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")])
    assert got["client"] == ("203.0.113.7", 0)
    assert got["scheme"] == "https"
    # the headers themselves still reach the application
    assert got["headers"]["x-forwarded-for"] == ["203.0.113.7"]


@pytest.mark.parametrize("kind", KINDS)
def test_without_forwarding_headers_the_peer_is_the_client(raw_servers, kind):
    got = seen(raw_servers(kind), kind)
    assert got["client"][0] == "127.0.0.1"
    assert got["client"][1] > 0
    assert got["scheme"] == "http"


@pytest.mark.parametrize("kind", KINDS)
def test_untrusted_peer_headers_are_ignored(raw_servers, kind):
    server = raw_servers(kind, "--forwarded-allow-ips", "10.0.0.1")
    got = seen(server, kind, [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https"),
                              ("Forwarded", "for=192.0.2.60;proto=https")])
    assert got["client"][0] == "127.0.0.1"
    assert got["client"][1] > 0, "the real peer's port, not a forwarded 0"
    assert got["scheme"] == "http"


@pytest.mark.parametrize("kind", KINDS)
def test_chain_takes_the_rightmost_untrusted_address(raw_servers, kind):
    default = raw_servers(kind)
    chain = [("X-Forwarded-For", "203.0.113.7, 198.51.100.2")]
    assert seen(default, kind, chain)["client"] == ("198.51.100.2", 0)
    # with 198.51.100.0/24 trusted too, the hop left of it is the client
    cidr = raw_servers(kind, "--forwarded-allow-ips", "127.0.0.0/8,198.51.100.0/24")
    assert seen(cidr, kind, chain)["client"] == ("203.0.113.7", 0)
    # every hop trusted: the leftmost one
    assert seen(cidr, kind, [("X-Forwarded-For", "198.51.100.9, 127.0.0.5")])["client"] == ("198.51.100.9", 0)
    # repeated header lines form one chain
    two = [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-For", "198.51.100.2")]
    assert seen(cidr, kind, two)["client"] == ("203.0.113.7", 0)


@pytest.mark.parametrize("kind", KINDS)
def test_star_trusts_everyone_and_takes_the_leftmost(raw_servers, kind):
    server = raw_servers(kind, "--forwarded-allow-ips", "*")
    got = seen(server, kind, [("X-Forwarded-For", "203.0.113.7, 198.51.100.2, 10.0.0.3"), ("X-Forwarded-Proto", "https")])
    assert got["client"] == ("203.0.113.7", 0)
    assert got["scheme"] == "https"


@pytest.mark.parametrize("kind", KINDS)
def test_forwarded_port_is_kept(raw_servers, kind):
    server = raw_servers(kind)
    assert seen(server, kind, [("X-Forwarded-For", "203.0.113.7:4711")])["client"] == ("203.0.113.7", 4711)
    assert seen(server, kind, [("X-Forwarded-For", "[2001:db8::7]:4711")])["client"] == ("2001:db8::7", 4711)


@pytest.mark.peregrine_only  # uvicorn takes any string as the client's host; Peregrine only IP literals
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
@pytest.mark.parametrize("value", ["unknown", "example.com", "203.0.113.7, unknown", "203.0.113.7:99999", "not an address"])
def test_invalid_forwarded_for_is_ignored(raw_servers, kind, value):
    got = seen(raw_servers(kind), kind, [("X-Forwarded-For", value)])
    assert got["client"][0] == "127.0.0.1"
    assert got["client"][1] > 0


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("value", ["ftp", "https, http, https, ftp"])
def test_invalid_forwarded_proto_is_ignored(raw_servers, kind, value):
    assert seen(raw_servers(kind), kind, [("X-Forwarded-Proto", value)])["scheme"] == "http"


@pytest.mark.peregrine_only  # RFC 7239 Forwarded: uvicorn does not read it
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_forwarded_header(raw_servers, kind):
    server = raw_servers(kind)
    got = seen(server, kind, [("Forwarded", 'for=192.0.2.60;proto=https;by=203.0.113.43')])
    assert got["client"] == ("192.0.2.60", 0)
    assert got["scheme"] == "https"
    got = seen(server, kind, [("Forwarded", 'for="[2001:db8:cafe::17]:4711";proto=http, for=127.0.0.1;proto=https')])
    assert got["client"] == ("2001:db8:cafe::17", 4711)
    assert got["scheme"] == "http", "the proto of the chosen hop, not of the trusted one after it"
    # broken syntax: the whole header is ignored
    got = seen(server, kind, [("Forwarded", 'for="192.0.2.60;proto=https')])
    assert got["client"][0] == "127.0.0.1" and got["scheme"] == "http"
    # X-Forwarded-* wins when both are present
    got = seen(server, kind, [("Forwarded", "for=192.0.2.60"), ("X-Forwarded-For", "198.51.100.2")])
    assert got["client"] == ("198.51.100.2", 0)


@pytest.mark.peregrine_only  # --unix peers and the unix entry
@pytest.mark.parametrize("trust", [None, "unix"])
def test_unix_socket_peers(start_server, tmp_path, trust):
    sock = str(tmp_path / "p.sock")
    options = ["--unix", sock] + (["--forwarded-allow-ips", "unix"] if trust else [])
    server = start_server("raw_asgi:app", *options)
    got = seen(server, "asgi", [("X-Forwarded-For", "203.0.113.7"), ("X-Forwarded-Proto", "https")])
    if trust:
        assert got["client"] == ("203.0.113.7", 0)
        assert got["scheme"] == "https"
    else:
        assert got["client"] is None, "the default list does not trust unix peers"
        assert got["scheme"] == "http"


@pytest.mark.peregrine_only  # the message is Peregrine's
@pytest.mark.parametrize("value", ["localhost", "10.0.0.0/33", "10.0.0.1,proxy.internal"])
def test_bad_forwarded_allow_ips_is_one_line_and_exit_2(value):
    code, out = run_cli("--forwarded-allow-ips", value, "--port", str(free_port()), "raw_asgi:app")
    lines = [l for l in out.splitlines() if l.strip()]
    assert code == 2, out
    assert len(lines) == 1, out
    assert "--forwarded-allow-ips" in lines[0]


def test_flask_sees_the_forwarded_client(start_server):
    pytest.importorskip("flask", reason="Flask needs markupsafe, which has a wheel here only for CPython 3.11")
    if os.environ.get("E2E_REFERENCE") == "1":
        pytest.skip("gunicorn does not set REMOTE_ADDR from X-Forwarded-For")
    server = start_server("flask_app:app")
    r = server.get("/client", headers={"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"})
    assert r.json()["remote_addr"] == "203.0.113.7"
    assert r.json()["is_secure"] is True
    untrusted = start_server("flask_app:app", "--forwarded-allow-ips", "10.0.0.1")
    r = untrusted.get("/client", headers={"X-Forwarded-For": "203.0.113.7", "X-Forwarded-Proto": "https"})
    assert r.json()["remote_addr"] == "127.0.0.1"
    assert r.json()["is_secure"] is False


def test_fastapi_sees_the_forwarded_client(start_server):
    pytest.importorskip("fastapi", reason="FastAPI needs pydantic-core, which has a wheel here only for CPython 3.11")
    server = start_server("fastapi_app:app")
    r = server.get("/client", headers={"X-Forwarded-For": "203.0.113.7:4711", "X-Forwarded-Proto": "https"})
    assert (r.json()["host"], r.json()["port"], r.json()["scheme"]) == ("203.0.113.7", 4711, "https")


# ---------------------------------------------------------------------------
# --request-id


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_request_id_is_generated_when_absent(raw_servers, kind):
    server = raw_servers(kind, *OPS)
    path = probe()
    got = seen(server, kind, path=("/scope" if kind == "asgi" else "/environ") + path)
    rid = got["response"].headers["x-request-id"]
    assert HEX32.match(rid), rid
    assert got["headers"]["x-request-id"] == [rid], "the application sees the same id"
    line = log_lines(server, path)[0]
    assert "request_id=" + rid in line, line
    # a second request gets another id
    assert seen(server, kind)["response"].headers["x-request-id"] != rid


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
@pytest.mark.parametrize("rid", ["abc-123", "0f8fad5b-d9cb-469f-a165-70867728950e", "YWJj+ZGVm/Zw==", "x" * 200])
def test_valid_client_request_id_is_kept(raw_servers, kind, rid):
    server = raw_servers(kind, *OPS)
    path = probe()
    got = seen(server, kind, [("X-Request-ID", rid)], path=("/scope" if kind == "asgi" else "/environ") + path)
    assert got["response"].headers.get_list("x-request-id") == [rid]
    assert got["headers"]["x-request-id"] == [rid]
    assert "request_id=" + rid in log_lines(server, path)[0]


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
@pytest.mark.parametrize("rid", ["has space", "semi;colon", "quote\"d", "x" * 201, ""])
def test_invalid_client_request_id_is_replaced(raw_servers, kind, rid):
    server = raw_servers(kind, *OPS)
    path = ("/scope" if kind == "asgi" else "/environ") + probe()
    with server.raw() as conn:
        r = conn.request("GET", path, headers=[("X-Request-ID", rid)])
    assert r.status == 200
    ids = r.header_all("x-request-id")
    assert len(ids) == 1 and HEX32.match(ids[0]), ids
    data = json.loads(r.body)
    if kind == "asgi":
        seen_ids = [v for n, v in data["headers"] if n == "x-request-id"]
    else:
        seen_ids = [data["HTTP_X_REQUEST_ID"]]
    assert seen_ids == ids, "the application sees only the new id"


@pytest.mark.peregrine_only
def test_repeated_request_ids_are_replaced_by_one(raw_servers):
    server = raw_servers("asgi", *OPS)
    with server.raw() as conn:
        r = conn.request("GET", "/scope", headers=[("X-Request-ID", "a"), ("X-Request-ID", "b")])
    data = json.loads(r.body)
    seen_ids = [v for n, v in data["headers"] if n == "x-request-id"]
    assert len(seen_ids) == 1 and HEX32.match(seen_ids[0]), seen_ids


@pytest.mark.peregrine_only
def test_without_the_option_nothing_is_added(raw_servers):
    got = seen(raw_servers("asgi"), "asgi")
    assert "x-request-id" not in got["response"].headers
    assert "x-request-id" not in got["headers"] and "x-request-start" not in got["headers"]


@pytest.mark.peregrine_only
def test_frameworks_see_the_request_id(start_server):
    pytest.importorskip("flask", reason="Flask needs markupsafe, which has a wheel here only for CPython 3.11")
    server = start_server("flask_app:app", "--request-id", "--request-start-header")
    r = server.get("/client")
    assert r.json()["request_id"] == r.headers["x-request-id"]
    assert r.json()["request_start"].startswith("t=")


# ---------------------------------------------------------------------------
# --request-start-header


def _start_micros(value):
    match = re.fullmatch(r"t=(\d{16})", value)
    assert match, value
    return int(match.group(1))


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_request_start_header(raw_servers, kind):
    server = raw_servers(kind, *OPS)
    got = seen(server, kind)
    micros = _start_micros(got["headers"]["x-request-start"][0])
    assert abs(micros / 1e6 - time.time()) < 86400, "within a day of this clock"


@pytest.mark.peregrine_only
def test_request_start_from_a_client_is_replaced_but_a_trusted_proxys_kept(raw_servers):
    untrusted = raw_servers("asgi", "--forwarded-allow-ips", "10.0.0.1", *OPS)
    got = seen(untrusted, "asgi", [("X-Request-Start", "t=1")])
    assert len(got["headers"]["x-request-start"]) == 1
    assert _start_micros(got["headers"]["x-request-start"][0]) > 1
    trusted = raw_servers("asgi", *OPS)
    got = seen(trusted, "asgi", [("X-Request-Start", "t=1500000000000000")])
    assert got["headers"]["x-request-start"] == ["t=1500000000000000"]


# ---------------------------------------------------------------------------
# --trace-context


@pytest.mark.peregrine_only
@pytest.mark.parametrize("kind", ["asgi", "wsgi"])
def test_valid_traceparent_is_logged_and_passed_on(raw_servers, kind):
    server = raw_servers(kind, *OPS)
    path = probe()
    got = seen(server, kind, [("traceparent", TRACEPARENT)], path=("/scope" if kind == "asgi" else "/environ") + path)
    assert got["headers"]["traceparent"] == [TRACEPARENT], "the header reaches the application untouched"
    line = log_lines(server, path)[0]
    assert "trace_id=4bf92f3577b34da6a3ce929d0e0e4736" in line, line
    assert "parent_id=00f067aa0ba902b7" in line, line


@pytest.mark.peregrine_only
@pytest.mark.parametrize("value", [
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    "garbage",
])
def test_invalid_traceparent_is_not_logged(raw_servers, value):
    server = raw_servers("asgi", *OPS)
    path = probe()
    got = seen(server, "asgi", [("traceparent", value)], path="/scope" + path)
    assert got["headers"]["traceparent"] == [value]
    line = log_lines(server, path)[0]
    assert "trace_id=- parent_id=-" in line, line


# ---------------------------------------------------------------------------
# --access-log-format


@pytest.mark.peregrine_only
def test_text_line_fields(raw_servers):
    server = raw_servers("asgi", *OPS)
    path = probe()
    with server.client() as c:
        r = c.get(path + "?a=1&b=2", headers={"User-Agent": "probe-agent/1.0", "traceparent": TRACEPARENT,
                                              "X-Forwarded-For": "203.0.113.7"})
    assert r.status_code == 404
    line = log_lines(server, path)[0]
    pattern = (r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z 203\.0\.113\.7:0 - "GET %s\?a=1&b=2 HTTP/1\.1" 404 (\d+) '
               r'(\d+\.\d{3})ms "probe-agent/1\.0" request_id=([0-9a-f]{32}) '
               r'trace_id=4bf92f3577b34da6a3ce929d0e0e4736 parent_id=00f067aa0ba902b7$') % re.escape(path)
    match = re.match(pattern, line)
    assert match, line
    assert int(match.group(1)) == len(r.content)
    assert match.group(3) == r.headers["x-request-id"]


@pytest.mark.peregrine_only
def test_text_line_escapes(raw_servers):
    server = raw_servers("asgi", *OPS)
    tag = uuid.uuid4().hex[:12]
    with server.raw() as conn:
        # {0} and %s would be expanded if the line were used as a format string
        conn.send(b'GET /esc-' + tag.encode() + b'/a"b\\c{0}%25s HTTP/1.1\r\nHost: x\r\n'
                  b'User-Agent: caf\xc3\xa9 "q" \\ \tend\r\n\r\n')
        assert conn.read_response().status == 404
    line = log_lines(server, "/esc-" + tag)[0]
    assert '"GET /esc-%s/a\\"b\\\\c{0}%%25s HTTP/1.1"' % tag in line, line
    assert '"caf\\xc3\\xa9 \\"q\\" \\\\ \\x09end"' in line, line


def _json_lines(server, needle, count=1):
    lines = log_lines(server, needle, count)
    records = []
    for line in lines:
        assert line.startswith("{") and line.endswith("}"), "nothing around the JSON object: %r" % line
        records.append(json.loads(line))
    return records


@pytest.mark.peregrine_only
def test_json_lines(raw_servers):
    server = raw_servers("wsgi", "--access-log-format", "json", "--request-id", "--trace-context")
    path = probe()
    with server.client() as c:
        ok = c.get("/environ" + path, params={"x": "1"}, headers={"User-Agent": "probe-agent/2.0", "traceparent": TRACEPARENT})
        missing = c.get(path + "/missing", headers={"X-Request-ID": "client-id-1"})
    first, second = _json_lines(server, path, 2)
    assert set(first) == {"time", "client", "client_port", "method", "path", "protocol", "status", "bytes",
                          "duration_ms", "user_agent", "request_id", "trace_id", "parent_id"}
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", first["time"])
    assert first["client"] == "127.0.0.1" and isinstance(first["client_port"], int) and first["client_port"] > 0
    assert (first["method"], first["path"], first["protocol"], first["status"]) == ("GET", "/environ" + path + "?x=1", "HTTP/1.1", 200)
    assert first["bytes"] == len(ok.content)
    assert isinstance(first["duration_ms"], float) and first["duration_ms"] >= 0
    assert first["user_agent"] == "probe-agent/2.0"
    assert first["request_id"] == ok.headers["x-request-id"]
    assert (first["trace_id"], first["parent_id"]) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert second["status"] == 404 and second["request_id"] == "client-id-1" == missing.headers["x-request-id"]
    assert second["trace_id"] is None and second["parent_id"] is None


@pytest.mark.peregrine_only
def test_json_escapes_keep_the_bytes(raw_servers):
    server = raw_servers("wsgi", "--access-log-format", "json", "--request-id", "--trace-context")
    tag = uuid.uuid4().hex[:12]
    agent = b'caf\xc3\xa9 "q" \\ \tend\x80\xff'
    with server.raw() as conn:
        conn.send(b'GET /esc-' + tag.encode() + b'/a"b\\c?q="x" HTTP/1.1\r\nHost: x\r\nUser-Agent: ' + agent + b'\r\n\r\n')
        assert conn.read_response().status == 404
    lines = log_lines(server, "/esc-" + tag)
    assert all(l.isascii() for l in lines)
    record = json.loads(lines[0])
    assert record["path"] == '/esc-%s/a"b\\c?q="x"' % tag
    assert record["user_agent"].encode("latin-1") == agent


@pytest.mark.peregrine_only
@pytest.mark.parametrize("workers", ["1", "2"])
def test_json_on_stdout_and_nothing_else_there(tmp_path, workers):
    """The shipper's view: every stdout line is one JSON object; the server's own messages are on stderr.
    With --workers 2, the workers set up their logging themselves (they start without Quarkus)."""
    port = free_port()
    out_path, err_path = tmp_path / "stdout", tmp_path / "stderr"
    argv = peregrine_cmd() + ["--port", str(port), "--venv", sys.prefix, "--workers", workers, "--access-log-format", "json",
                              "raw_asgi:app"]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(argv, cwd=str(APPS_DIR), env=base_env(), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        try:
            def ready():
                try:
                    with RawConn(port, timeout=1):
                        return True
                except OSError:
                    assert proc.poll() is None, err_path.read_text()
                    return False

            assert poll(ready, timeout=60), err_path.read_text()
            if workers == "2":
                # The first worker may answer before the second has started: the supervisor's line says both serve.
                assert poll(lambda: "with 2 workers" in err_path.read_text(), timeout=60), err_path.read_text()
            for i in range(5):
                with RawConn(port) as conn:
                    assert conn.request("GET", "/?n=%d" % i).status == 200
            assert poll(lambda: out_path.read_bytes().count(b"\n") >= 5, timeout=10), out_path.read_bytes()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    stdout = out_path.read_text(encoding="ascii")
    records = [json.loads(line) for line in stdout.splitlines()]
    assert sorted(r["path"] for r in records) == ["/?n=%d" % i for i in range(5)]
    stderr = err_path.read_text()
    assert "Peregrine" in stderr, "the startup line goes to stderr"
    if workers == "2":
        assert stderr.count("serving raw_asgi:app") == 2 + 1, "each worker's line and the supervisor's, on stderr:\n" + stderr


@pytest.mark.peregrine_only
def test_access_log_format_implies_the_access_log(start_server):
    server = start_server("raw_asgi:app", "--access-log-format", "text")
    path = probe()
    server.get(path)
    line = log_lines(server, path)[0]
    assert '"GET %s HTTP/1.1" 404' % path in line, line
    assert "request_id=" not in line and "trace_id=" not in line, "fields of options that are off are left out"
