"""Static files end to end (--static-dir, issue 16 items 1-7 and 9): matching and the option's errors,
safe paths (each traversal case on its own), methods, response headers, preconditions, byte ranges,
sendfile on plain HTTP/1.1 (proved with strace) and chunked reads over TLS and HTTP/2, a file cut
short while it is sent, a 1 GiB file to a slow reader with bounded RSS, and Django's admin files.

Clients: raw sockets (RawConn) where the path must reach the server exactly as written (httpx and
curl would normalize ``..``), httpx for HTTP/1.1, TLS and HTTP/2, curl for its range handling.
"""

import hashlib
import os
import re
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conftest import free_port, java_pid, poll, strace_attached
from test_http3 import browser, fetch_h3, open_h3, start_h3  # noqa: F401 (browser is a module fixture)
from test_tls import certs, wait_tls_ready  # noqa: F401 (certs is the module-scoped fixture making the test certificates)

pytestmark = pytest.mark.peregrine_only

APP = "raw_asgi:app"
HELLO = b"hello, static\n"
BIG = os.urandom(300 * 1024)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/ (served), outside/ (never served), and linkroot -> root (a root that is a symlink)."""
    base = tmp_path_factory.mktemp("static")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "hello.txt").write_bytes(HELLO)
    (root / "big.bin").write_bytes(BIG)
    (root / "style.css").write_text("body { color: red }\n")
    (root / "app.js").write_text("console.log(1)\n")
    (root / "data.json").write_text("{}\n")
    (root / "logo.svg").write_text("<svg/>\n")
    (root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (root / "font.woff2").write_bytes(b"wOF2")
    (root / "noextension").write_bytes(b"?")
    (root / "empty.txt").write_bytes(b"")
    (root / "space name.txt").write_bytes(b"spaced\n")
    (root / "caf\u00e9.txt").write_bytes(b"accent\n")
    (root / "sub").mkdir()
    (root / "sub" / "index.html").write_text("<h1>index</h1>\n")
    (root / "sub" / "page.html").write_text("<p>page</p>\n")
    (root / "bare").mkdir()  # a directory without index.html
    (root / ".env").write_text("SECRET=1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (outside / "secret.txt").write_text("outside secret\n")
    (root / "inside-link.txt").symlink_to(root / "hello.txt")
    (root / "outside-link.txt").symlink_to(outside / "secret.txt")
    (root / "outside-dir").symlink_to(outside)
    (root / "dot-link.txt").symlink_to(root / ".env")
    (base / "linkroot").symlink_to(root)
    return base


@pytest.fixture(scope="module")
def server(start_module_server, tree):
    return start_module_server(APP, "--static-dir", "/static=%s" % (tree / "root"),
                               "--static-dir", "/linked/=%s" % (tree / "linkroot"))


def raw_get(server, path, method="GET", headers=None):
    with server.raw() as conn:
        return conn.request(method, path, headers=headers)


# ---------------------------------------------------------------------------
# 1. Option and matching


def test_file_under_prefix_is_served(server):
    r = server.get("/static/hello.txt")
    assert r.status_code == 200
    assert r.content == HELLO


def test_outside_the_prefix_goes_to_the_application(server):
    assert server.get("/").text == "hello, asgi"
    # a path that only starts like the prefix is not under it
    assert server.get("/staticky").text == "not found: /staticky"


def test_missing_file_under_prefix_is_a_404_from_the_server(server):
    r = server.get("/static/nope.txt")
    assert r.status_code == 404
    assert r.text == "Not Found\n"


def test_second_mount_with_a_root_that_is_a_symlink(server):
    r = server.get("/linked/hello.txt")
    assert r.status_code == 200 and r.content == HELLO
    assert raw_get(server, "/linked/outside-link.txt").status == 404


def test_environment_gives_comma_separated_pairs(start_server, tree):
    env = {"PEREGRINE_STATIC_DIR": "/a=%s,/b=%s" % (tree / "root", tree / "root" / "sub")}
    s = start_server(APP, env=env)
    assert s.get("/a/hello.txt").content == HELLO
    assert s.get("/b/page.html").text == "<p>page</p>\n"


@pytest.mark.parametrize("value, says", [
    ("static", "PREFIX=DIR"),
    ("static=.", "must start with /"),
    ("/static=/no/such/directory", "not a directory"),
])
def test_bad_pair_is_refused_with_one_line_and_exit_2(start_server, value, says):
    s = start_server(APP, "--static-dir", value, wait=False)
    assert s.wait_exit() == 2
    lines = [l for l in s.complete_output().splitlines() if l.strip()]
    assert len(lines) == 1, lines
    assert "--static-dir" in lines[0] and says in lines[0]


# ---------------------------------------------------------------------------
# 2. Safe paths: each case on its own, sent byte for byte


@pytest.mark.parametrize("path", [
    "/static/../outside/secret.txt",
    "/static/sub/../../outside/secret.txt",
    "/static/%2e%2e/outside/secret.txt",
    "/static/sub/%2E%2E/hello.txt",
    "/static/./hello.txt",
    "/static/sub//page.html",
    "/static/..%2foutside%2fsecret.txt",
    "/static/sub%2fpage.html",
    "/static/sub%2Fpage.html",
    "/static/sub%5cpage.html",
    "/static/sub\\page.html",
    "/static/hello.txt%00.png",
    "/static/.env",
    "/static/%2eenv",
    "/static/.git/config",
    "/static/outside-link.txt",
    "/static/outside-dir/secret.txt",
    "/static/dot-link.txt",
    "/static/hello.txt/",
    "/static/bare/",
    "/static/caf%e9.txt",
])
def test_unsafe_path_is_a_404(server, path):
    r = raw_get(server, path)
    assert r.status == 404, (path, r.status)
    assert b"secret" not in r.body.lower() and b"SECRET" not in r.body


def test_percent_decoding_is_done_once(server):
    assert raw_get(server, "/static/space%20name.txt").body == b"spaced\n"
    assert raw_get(server, "/static/caf%C3%A9.txt").body == b"accent\n"
    # %2520 decodes once to %20, a name that does not exist
    assert raw_get(server, "/static/space%2520name.txt").status == 404


def test_symlink_inside_the_root_is_served(server):
    assert raw_get(server, "/static/inside-link.txt").body == HELLO


def test_directory_with_slash_serves_its_index(server):
    r = server.get("/static/sub/")
    assert r.status_code == 200
    assert r.text == "<h1>index</h1>\n"
    assert r.headers["content-type"] == "text/html; charset=utf-8"


def test_directory_without_slash_is_redirected_keeping_the_query(server):
    r = raw_get(server, "/static/sub?a=1&b=2")
    assert r.status == 301
    assert r.header("location") == "/static/sub/?a=1&b=2"
    r = raw_get(server, "/static")
    assert r.status == 301 and r.header("location") == "/static/"


def test_no_directory_listing(server):
    assert raw_get(server, "/static/").status == 404  # the root has no index.html


# ---------------------------------------------------------------------------
# 3. Methods


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_other_methods_get_405_with_allow(server, method):
    r = server.request(method, "/static/hello.txt")
    assert r.status_code == 405
    assert r.headers["allow"] == "GET, HEAD"


def test_head_sends_exactly_the_headers_of_get(server):
    def comparable(r):
        return [(n, v) for n, v in r.headers if n.lower() != "date"]

    get, head = raw_get(server, "/static/big.bin"), raw_get(server, "/static/big.bin", method="HEAD")
    assert head.status == 200 and head.body == b""
    assert comparable(head) == comparable(get)


# ---------------------------------------------------------------------------
# 4. Response headers


@pytest.mark.parametrize("name, content_type", [
    ("hello.txt", "text/plain; charset=utf-8"),
    ("style.css", "text/css; charset=utf-8"),
    ("app.js", "text/javascript; charset=utf-8"),
    ("sub/page.html", "text/html; charset=utf-8"),
    ("data.json", "application/json"),
    ("logo.svg", "image/svg+xml"),
    ("pic.png", "image/png"),
    ("font.woff2", "font/woff2"),
    ("noextension", "application/octet-stream"),
])
def test_content_type_from_the_table(server, name, content_type):
    assert server.get("/static/" + name).headers["content-type"] == content_type


def test_validators_and_lengths(server, tree):
    r = server.get("/static/big.bin")
    stat = (tree / "root" / "big.bin").stat()
    assert r.headers["content-length"] == str(len(BIG))
    assert r.headers["accept-ranges"] == "bytes"
    assert r.headers["etag"] == '"%x-%x"' % (stat.st_size, stat.st_mtime_ns // 1000)
    assert r.headers["last-modified"] == time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(int(stat.st_mtime)))
    assert r.content == BIG


def test_etag_changes_with_the_file(start_server, tmp_path):
    (tmp_path / "f.txt").write_text("one\n")
    s = start_server(APP, "--static-dir", "/s=%s" % tmp_path)
    first = s.get("/s/f.txt").headers["etag"]
    (tmp_path / "f.txt").write_text("two two\n")
    r = s.get("/s/f.txt")
    assert r.text == "two two\n" and r.headers["etag"] != first


# ---------------------------------------------------------------------------
# 5. Conditional requests


@pytest.fixture(scope="module")
def validators(server):
    r = server.get("/static/hello.txt")
    return r.headers["etag"], r.headers["last-modified"]


def test_if_none_match_its_tag_is_304(server, validators):
    etag, last_modified = validators
    r = server.get("/static/hello.txt", headers={"if-none-match": etag})
    assert r.status_code == 304 and r.content == b""
    assert r.headers["etag"] == etag and r.headers["last-modified"] == last_modified


def test_if_none_match_list_weak_comparison_and_star(server, validators):
    etag, _ = validators
    for value in ('"other", %s' % etag, "W/" + etag, '"a", W/"b",W/%s' % etag, "*"):
        assert server.get("/static/hello.txt", headers={"if-none-match": value}).status_code == 304, value
    assert server.get("/static/hello.txt", headers={"if-none-match": '"other"'}).status_code == 200


def test_if_modified_since(server, validators):
    _, last_modified = validators
    assert server.get("/static/hello.txt", headers={"if-modified-since": last_modified}).status_code == 304
    assert server.get("/static/hello.txt", headers={"if-modified-since": "Sat, 01 Jan 2000 00:00:00 GMT"}).status_code == 200
    assert server.get("/static/hello.txt", headers={"if-modified-since": "not a date"}).status_code == 200


def test_if_modified_since_is_ignored_with_if_none_match(server, validators):
    _, last_modified = validators
    r = server.get("/static/hello.txt", headers={"if-none-match": '"other"', "if-modified-since": last_modified})
    assert r.status_code == 200


def test_if_match_and_if_unmodified_since_give_412(server, validators):
    etag, last_modified = validators
    assert server.get("/static/hello.txt", headers={"if-match": '"other"'}).status_code == 412
    assert server.get("/static/hello.txt", headers={"if-match": "W/" + etag}).status_code == 412  # strong comparison
    assert server.get("/static/hello.txt", headers={"if-match": etag}).status_code == 200
    assert server.get("/static/hello.txt", headers={"if-match": "*"}).status_code == 200
    assert server.get("/static/hello.txt", headers={"if-unmodified-since": "Sat, 01 Jan 2000 00:00:00 GMT"}).status_code == 412
    assert server.get("/static/hello.txt", headers={"if-unmodified-since": last_modified}).status_code == 200


def test_if_range_with_its_tag_or_date_gives_the_range(server, validators):
    etag, last_modified = validators
    for value in (etag, last_modified):
        r = server.get("/static/hello.txt", headers={"range": "bytes=0-4", "if-range": value})
        assert r.status_code == 206 and r.content == HELLO[:5], value


def test_if_range_weak_or_mismatched_gives_the_whole_file(server, validators):
    etag, _ = validators
    for value in ("W/" + etag, '"other"', "Sat, 01 Jan 2000 00:00:00 GMT"):
        r = server.get("/static/hello.txt", headers={"range": "bytes=0-4", "if-range": value})
        assert r.status_code == 200 and r.content == HELLO, value


def test_304_wins_over_range(server, validators):
    etag, _ = validators
    r = server.get("/static/hello.txt", headers={"range": "bytes=0-4", "if-none-match": etag})
    assert r.status_code == 304


def test_head_with_if_none_match_is_304(server, validators):
    etag, _ = validators
    assert server.request("HEAD", "/static/hello.txt", headers={"if-none-match": etag}).status_code == 304


# ---------------------------------------------------------------------------
# 6. Byte ranges


@pytest.mark.parametrize("spec, first, last", [
    ("bytes=0-99", 0, 99),
    ("bytes=100-", 100, len(BIG) - 1),
    ("bytes=-100", len(BIG) - 100, len(BIG) - 1),
    ("bytes=1000-999999999", 1000, len(BIG) - 1),
    ("bytes=-999999999", 0, len(BIG) - 1),
    ("BYTES = 5-5", 5, 5),
])
def test_single_range_is_206(server, spec, first, last):
    r = server.get("/static/big.bin", headers={"range": spec})
    assert r.status_code == 206
    assert r.headers["content-range"] == "bytes %d-%d/%d" % (first, last, len(BIG))
    assert r.headers["content-length"] == str(last - first + 1)
    assert r.content == BIG[first:last + 1]


def test_curl_range(server, tmp_path):
    out = tmp_path / "part"
    subprocess.run(["curl", "-sf", "-r", "10-19", "-o", str(out), server.url + "/static/big.bin"], check=True, timeout=30)
    assert out.read_bytes() == BIG[10:20]


def parse_multipart(content_type, body):
    boundary = re.search(r"boundary=(\S+)", content_type).group(1).encode()
    parts = []
    for chunk in body.split(b"--" + boundary)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        headers = dict(line.split(b": ", 1) for line in head.strip().split(b"\r\n"))
        parts.append((headers[b"content-range"].decode(), data[:-2]))  # the CRLF before the next boundary
    return parts


def test_several_ranges_are_multipart_byteranges(server):
    r = server.get("/static/big.bin", headers={"range": "bytes=0-9, 200-299,-5"})
    assert r.status_code == 206
    assert r.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert int(r.headers["content-length"]) == len(r.content)
    assert parse_multipart(r.headers["content-type"], r.content) == [
        ("bytes 0-9/%d" % len(BIG), BIG[0:10]),
        ("bytes 200-299/%d" % len(BIG), BIG[200:300]),
        ("bytes %d-%d/%d" % (len(BIG) - 5, len(BIG) - 1, len(BIG)), BIG[-5:]),
    ]


def test_multipart_with_curl(server):
    out = subprocess.run(["curl", "-sf", "-r", "0-1,4-5", server.url + "/static/hello.txt"],
                         check=True, timeout=30, stdout=subprocess.PIPE).stdout
    assert b"content-range: bytes 0-1/14\r\n\r\nhe\r\n" in out
    assert b"content-range: bytes 4-5/14\r\n\r\no,\r\n" in out


def test_overlapping_or_too_many_ranges_get_the_whole_file(server):
    for spec in ("bytes=0-99,50-150", "bytes=" + ",".join("%d-%d" % (i * 10, i * 10 + 1) for i in range(17))):
        r = server.get("/static/big.bin", headers={"range": spec})
        assert r.status_code == 200 and r.content == BIG, spec
    r = server.get("/static/big.bin", headers={"range": "bytes=" + ",".join("%d-%d" % (i * 10, i * 10 + 1) for i in range(16))})
    assert r.status_code == 206


def test_unsatisfiable_range_is_416(server):
    for spec in ("bytes=%d-" % len(BIG), "bytes=999999999-999999999", "bytes=-0"):
        r = server.get("/static/big.bin", headers={"range": spec})
        assert r.status_code == 416, spec
        assert r.headers["content-range"] == "bytes */%d" % len(BIG)
    assert server.get("/static/empty.txt", headers={"range": "bytes=0-0"}).status_code == 416


def test_malformed_range_is_ignored(server):
    for spec in ("bytes=5-1", "bytes=a-b", "pages=1-2", "bytes=1-2-3"):
        r = server.get("/static/big.bin", headers={"range": spec})
        assert r.status_code == 200 and len(r.content) == len(BIG), spec


def test_head_ignores_range(server):
    r = server.request("HEAD", "/static/big.bin", headers={"range": "bytes=0-9"})
    assert r.status_code == 200 and r.headers["content-length"] == str(len(BIG))


# ---------------------------------------------------------------------------
# 7. Sending: sendfile on plain HTTP/1.1, chunks over TLS and HTTP/2


def strace_sendfile(pid, out_path):
    """strace attached to every thread of pid, tracing sendfile; returns the process once attached."""
    return strace_attached(pid, "trace=sendfile", out_path)


def test_plain_http11_uses_sendfile(start_server, tree, tmp_path):
    s = start_server(APP, "--static-dir", "/static=%s" % (tree / "root"))
    pid = java_pid(s)
    trace = tmp_path / "trace"
    tracer = strace_sendfile(pid, trace)
    try:
        assert s.get("/static/big.bin").content == BIG
        assert s.get("/static/big.bin", headers={"range": "bytes=100-"}).content == BIG[100:]
    finally:
        tracer.terminate()
        tracer.wait(10)
    calls = [line for line in trace.read_text().splitlines() if "sendfile(" in line]
    assert calls, "no sendfile call traced"
    sent = sum(int(m.group(1)) for m in (re.search(r"= (\d+)$", line) for line in calls) if m)
    assert sent == len(BIG) + len(BIG) - 100


def test_stat_calls_stay_bounded_for_a_known_file(start_server, tmp_path):
    deep = tmp_path / "root" / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "f.txt").write_bytes(HELLO)
    s = start_server(APP, "--static-dir", "/s=%s" % (tmp_path / "root"))
    assert s.get("/s/a/b/c/d/f.txt").content == HELLO  # resolved once
    trace = tmp_path / "trace"
    tracer = strace_attached(java_pid(s), "trace=%stat,%file", trace)
    try:
        with httpx.Client(base_url=s.url) as client:
            for _ in range(20):
                assert client.get("/s/a/b/c/d/f.txt").content == HELLO
    finally:
        tracer.terminate()
        tracer.wait(10)
    calls = [line for line in trace.read_text().splitlines() if "f.txt" in line or "/d\"" in line or "/c\"" in line]
    # per request: one stat of the known real path (a small file's bytes are kept: no open); never a
    # walk of every component
    assert len(calls) <= 20 + 2, "\n".join(calls[:40])


def test_known_file_whose_directory_becomes_a_symlink_outside_is_a_404(start_server, tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "f.txt").write_bytes(HELLO)
    (outside / "f.txt").write_bytes(b"outside secret\n")
    s = start_server(APP, "--static-dir", "/s=%s" % root)
    assert s.get("/s/sub/f.txt").content == HELLO
    (root / "sub" / "f.txt").unlink()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)
    assert s.get("/s/sub/f.txt").status_code == 404


@pytest.fixture(scope="module")
def tls_server(start_module_server, tree, certs):
    s = start_module_server(APP, *certs.pair("default"), "--static-dir", "/static=%s" % (tree / "root"))
    return wait_tls_ready(s, certs)


def test_tls_http11_reads_in_chunks(tls_server, certs):
    with httpx.Client(verify=ssl.create_default_context(cafile=certs.ca), http2=False, base_url="https://localhost:%d" % tls_server.port) as client:
        r = client.get("/static/big.bin")
        assert r.http_version == "HTTP/1.1"
        assert r.content == BIG
        r = client.get("/static/big.bin", headers={"range": "bytes=0-9,-10"})
        assert parse_multipart(r.headers["content-type"], r.content)[1][1] == BIG[-10:]


def test_http2_serves_files_and_ranges(tls_server, certs):
    with httpx.Client(verify=ssl.create_default_context(cafile=certs.ca), http2=True, base_url="https://localhost:%d" % tls_server.port) as client:
        r = client.get("/static/big.bin")
        assert r.http_version == "HTTP/2"
        assert r.content == BIG
        assert r.headers["content-length"] == str(len(BIG))
        r = client.get("/static/big.bin", headers={"range": "bytes=-100"})
        assert r.status_code == 206 and r.content == BIG[-100:]
        etag = r.headers["etag"]
        assert client.get("/static/big.bin", headers={"if-none-match": etag}).status_code == 304
        assert client.head("/static/big.bin").headers["content-length"] == str(len(BIG))
        assert client.post("/static/big.bin").status_code == 405
        assert client.get("/static/../outside/secret.txt").status_code == 404


def test_plain_http2_prior_knowledge(server):
    with httpx.Client(http1=False, http2=True, base_url=server.url) as client:
        r = client.get("/static/big.bin")
        assert r.http_version == "HTTP/2" and r.content == BIG


def test_http3_serves_files_and_ranges(start_server, tree, certs, browser):
    s = start_h3(start_server, certs, "--static-dir", "/static=%s" % (tree / "root"))
    page = open_h3(browser, s.port, path="/static/hello.txt", isolated=True, server=s)
    try:
        r = fetch_h3(page, "/static/big.bin", keep_body=False)
        assert r.status == 200 and r.length == len(BIG)
        assert r.sha256 == hashlib.sha256(BIG).hexdigest()
        r = fetch_h3(page, "/static/big.bin", headers={"range": "bytes=100-199"})
        assert r.status == 206 and r.body == BIG[100:200]
        assert r.headers["content-range"] == "bytes 100-199/%d" % len(BIG)
        etag = fetch_h3(page, "/static/hello.txt").headers["etag"]
        assert fetch_h3(page, "/static/hello.txt", headers={"if-none-match": etag}).status == 304
    finally:
        page.close()


def slow_read(port, path, pause_after, read_size=65536):
    """A raw GET whose reader stops after pause_after bytes; returns the socket and what was read."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
    got = b""
    while len(got) < pause_after:
        more = sock.recv(read_size)
        if not more:
            break
        got += more
    return sock, got


@pytest.mark.parametrize("over_tls", [False, True])
def test_file_truncated_while_sent_closes_the_connection(start_server, tmp_path, certs, over_tls):
    data = os.urandom(8 * 1024 * 1024)
    kept = 1024 * 1024
    (tmp_path / "shrinks.bin").write_bytes(data)
    options = ["--static-dir", "/s=%s" % tmp_path] + (certs.pair("default") if over_tls else [])
    s = start_server(APP, *options)
    if over_tls:
        wait_tls_ready(s, certs)
        sock = tls_connect(s.port, certs)
        sock.sendall(b"GET /s/shrinks.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        got = sock.recv(65536)
    else:
        sock, got = slow_read(s.port, "/s/shrinks.bin", 1)
    with open(tmp_path / "shrinks.bin", "r+b") as f:
        f.truncate(kept)
    while True:
        more = sock.recv(1 << 20)
        if not more:
            break
        got += more
    sock.close()
    head, _, body = got.partition(b"\r\n\r\n")
    assert b"content-length: %d" % len(data) in head
    # cut short and closed, never padded to the announced length: the client knows it is incomplete
    assert len(body) < len(data)
    assert body[:kept] == data[:len(body[:kept])]
    if over_tls:
        # read in chunks, the server sends only bytes it read before the file shrank
        assert body == data[:len(body)]


def tls_connect(port, certs):
    context = ssl.create_default_context(cafile=certs.ca)
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    return context.wrap_socket(raw, server_hostname="localhost")


def rss_kib(pid):
    for line in Path("/proc/%d/status" % pid).read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("over_tls", [False, True])
def test_1gib_file_to_a_slow_reader_keeps_rss_bounded(start_server, tmp_path, certs, over_tls):
    huge = tmp_path / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)  # sparse: no disk, and the page cache serves zeros
    options = ["--static-dir", "/s=%s" % tmp_path]
    if over_tls:
        options += certs.pair("default")
    s = start_server(APP, *options)
    if over_tls:
        wait_tls_ready(s, certs)
    pid = java_pid(s)
    base = rss_kib(pid)
    if over_tls:
        sock = tls_connect(s.port, certs)
        sock.sendall(b"GET /s/huge.bin HTTP/1.1\r\nHost: x\r\n\r\n")
        got = sock.recv(65536)
    else:
        sock, got = slow_read(s.port, "/s/huge.bin", 1)
    assert b"content-length: %d" % (1 << 30) in got
    # the reader is stalled: whatever the server holds for it is in memory now
    peak = base
    for _ in range(20):
        sock.recv(4096)
        peak = max(peak, rss_kib(pid))
    assert peak - base < 128 * 1024, "RSS grew by %d KiB for a stalled 1 GiB download" % (peak - base)
    sock.close()
    base_url = ("https://localhost:%d" if over_tls else "http://127.0.0.1:%d") % s.port
    with httpx.Client(verify=ssl.create_default_context(cafile=certs.ca), base_url=base_url) as client:
        assert client.get("/").status_code == 200  # and the server serves on


# ---------------------------------------------------------------------------
# Django's admin files through --static-dir


def test_django_admin_static_files(start_server):
    import django
    admin_static = Path(django.__file__).parent / "contrib" / "admin" / "static"
    s = start_server("django_app.wsgi:application", "--static-dir", "/static=%s" % admin_static)
    css = (admin_static / "admin" / "css" / "base.css").read_bytes()
    r = s.get("/static/admin/css/base.css")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/css; charset=utf-8"
    assert hashlib.sha256(r.content).digest() == hashlib.sha256(css).digest()
    r = s.get("/static/admin/img/icon-yes.svg")
    assert r.headers["content-type"] == "image/svg+xml"
    assert r.content == (admin_static / "admin" / "img" / "icon-yes.svg").read_bytes()


# ---------------------------------------------------------------------------
# 9. Files that applications send: wsgi.file_wrapper and http.response.pathsend


def traced_sendfile_bytes(server, tmp_path, requests):
    """Runs requests() with strace on the server's JVM; the bytes its sendfile calls moved."""
    trace = tmp_path / "trace"
    tracer = strace_sendfile(java_pid(server), trace)
    try:
        requests()
    finally:
        tracer.terminate()
        tracer.wait(10)
    return sum(int(m.group(1)) for m in (re.search(r"sendfile\(.*= (\d+)$", line) for line in trace.read_text().splitlines()) if m)


def test_wsgi_file_wrapper_goes_out_with_sendfile(start_server, tree, tmp_path):
    s = start_server("static_apps:wsgi_app", "--protocol", "wsgi")
    big = tree / "root" / "big.bin"

    def requests():
        r = s.get("/file", params={"path": str(big)})
        assert r.status_code == 200 and r.content == BIG
        assert r.headers["content-length"] == str(len(BIG))
        r = s.get("/file", params={"path": str(big), "offset": 1000})
        assert r.content == BIG[1000:] and r.headers["content-length"] == str(len(BIG) - 1000)
        r = s.get("/file", params={"path": str(big), "offset": 10, "length": 100})
        assert r.content == BIG[10:110]

    # The 100-byte region goes out in the head's own write (read, not sendfile'd): see the next test.
    assert traced_sendfile_bytes(s, tmp_path, requests) == len(BIG) + len(BIG) - 1000
    assert s.request("HEAD", "/file", params={"path": str(big)}).headers["content-length"] == str(len(BIG))
    r = s.get("/bytesio", params={"size": 100000})  # no file under it: iterated as before
    assert r.content == b"x" * 100000


def test_a_small_file_leaves_with_its_head_not_by_sendfile(start_server, tree, tmp_path):
    s = start_server(APP, "--static-dir", "/static=%s" % (tree / "root"))

    def requests():
        r = s.get("/static/hello.txt")
        assert r.status_code == 200 and r.content == HELLO
        r = s.get("/static/big.bin", headers={"range": "bytes=0-16383"})  # 16 KiB: the largest region read
        assert r.status_code == 206 and r.content == BIG[:16384]

    assert traced_sendfile_bytes(s, tmp_path, requests) == 0


def test_a_small_file_kept_in_memory_is_served_anew_once_it_changes(start_server, tmp_path):
    root = tmp_path / "changing"
    root.mkdir()
    page = root / "page.txt"
    page.write_bytes(b"first version\n")
    s = start_server(APP, "--static-dir", "/static=%s" % root)
    for _ in range(3):  # read from disk once, then from memory
        assert s.get("/static/page.txt").content == b"first version\n"
    page.write_bytes(b"second, longer version\n")
    assert s.get("/static/page.txt").content == b"second, longer version\n"
    # The same size, a new modification time: still seen.
    page.write_bytes(b"third, longer  version\n")
    stat = page.stat()
    os.utime(page, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    r = s.get("/static/page.txt")
    assert r.content == b"third, longer  version\n" and r.headers["content-length"] == "23"
    # Replaced by another file (another inode) of the same size and time: seen too.
    other = root / "other.txt"
    other.write_bytes(b"fourth longer  version\n")
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    os.replace(other, page)
    assert s.get("/static/page.txt").content == b"fourth longer  version\n"
    page.unlink()
    assert s.get("/static/page.txt").status_code == 404


def test_wsgi_file_wrapper_over_tls(start_server, tree, certs):
    s = wait_tls_ready(start_server("static_apps:wsgi_app", "--protocol", "wsgi", *certs.pair("default")), certs)
    with httpx.Client(verify=ssl.create_default_context(cafile=certs.ca), http2=True, base_url="https://localhost:%d" % s.port) as client:
        r = client.get("/file", params={"path": str(tree / "root" / "big.bin"), "offset": 7})
        assert r.http_version == "HTTP/2" and r.content == BIG[7:]


def test_asgi_scope_advertises_pathsend(start_server):
    s = start_server("static_apps:asgi_app")
    assert s.get("/extensions").json() == {"http.response.pathsend": {}}


def test_asgi_pathsend_goes_out_with_sendfile(start_server, tree, tmp_path):
    s = start_server("static_apps:asgi_app")
    big = tree / "root" / "big.bin"

    def requests():
        r = s.get("/pathsend", params={"path": str(big)})
        assert r.status_code == 200 and r.content == BIG
        assert r.headers["content-length"] == str(len(BIG))

    assert traced_sendfile_bytes(s, tmp_path, requests) == len(BIG)
    assert s.get("/pathsend", params={"path": str(tmp_path / "missing")}).status_code == 500


def test_starlette_file_response_uses_pathsend(start_server, tree, tmp_path, certs):
    s = start_server("static_apps:starlette_app")
    big = tree / "root" / "big.bin"

    def requests():
        r = s.get("/file", params={"path": str(big)})
        assert r.status_code == 200 and r.content == BIG
        assert r.headers["etag"] and r.headers["content-length"] == str(len(BIG))

    assert traced_sendfile_bytes(s, tmp_path, requests) == len(BIG)
    assert s.request("HEAD", "/file", params={"path": str(big)}).headers["content-length"] == str(len(BIG))


# ---------------------------------------------------------------------------
# 8. --compress-static: precompressed siblings


@pytest.fixture(scope="module")
def precompressed(tmp_path_factory):
    # The encoders are on this machine's mirror for CPython 3.11 only: under 3.13 these cases skip.
    brotli = pytest.importorskip("brotli", reason="the brotli encoder (requirements.txt) is not installed")
    zstandard = pytest.importorskip("zstandard", reason="the zstandard encoder (requirements.txt) is not installed")
    import gzip
    root = tmp_path_factory.mktemp("precompressed")
    text = b"body { color: red }\n" * 500
    (root / "app.css").write_bytes(text)
    (root / "app.css.br").write_bytes(brotli.compress(text))
    (root / "app.css.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    (root / "app.css.gz").write_bytes(gzip.compress(text))
    (root / "gz-only.js").write_bytes(text)
    (root / "gz-only.js.gz").write_bytes(gzip.compress(text))
    (root / "plain.txt").write_bytes(text)
    (root / "stale.txt").write_bytes(text)
    (root / "stale.txt.gz").write_bytes(gzip.compress(b"old"))
    old = (root / "stale.txt").stat().st_mtime - 100
    os.utime(root / "stale.txt.gz", (old, old))
    outside = tmp_path_factory.mktemp("precompressed-outside")
    (outside / "secret.gz").write_bytes(gzip.compress(b"outside secret"))
    (root / "linked.txt").write_bytes(text)
    (root / "linked.txt.gz").symlink_to(outside / "secret.gz")
    return root, text


@pytest.fixture(scope="module")
def compress_server(start_module_server, precompressed):
    root, _ = precompressed
    return start_module_server(APP, "--static-dir", "/s=%s" % root, "--compress-static")


def fetch_coded(server, path, accept, headers=None):
    with server.raw() as conn:
        fields = dict({"accept-encoding": accept} if accept is not None else {}, **(headers or {}))
        return conn.request("GET", path, headers=list(fields.items()))


@pytest.mark.parametrize("accept, coding", [
    ("br, zstd, gzip", "br"),
    ("gzip, zstd, br", "br"),  # the server's order on a tie
    ("zstd, gzip", "zstd"),
    ("gzip", "gzip"),
    ("GZIP", "gzip"),
    ("br;q=0.5, gzip;q=0.9", "gzip"),
    ("br;q=0, zstd;q=0, gzip", "gzip"),
    ("gzip;q=0", None),
    ("*", "br"),
    ("*;q=0", None),
    ("*;q=0, gzip", "gzip"),
    ("identity;q=0", None),
    ("identity", None),
    ("", None),
    (None, None),
])
def test_sibling_is_chosen_by_accept_encoding(compress_server, precompressed, accept, coding):
    import brotli
    import gzip
    import zstandard
    _, text = precompressed
    r = fetch_coded(compress_server, "/s/app.css", accept)
    assert r.status == 200
    assert r.header("content-encoding") == coding
    assert r.header("vary") == "accept-encoding"
    assert r.header("content-type") == "text/css; charset=utf-8"
    decode = {None: lambda b: b, "br": brotli.decompress, "gzip": gzip.decompress,
              "zstd": lambda b: zstandard.ZstdDecompressor().decompress(b, max_output_size=1 << 20)}[coding]
    assert decode(r.body) == text
    assert int(r.header("content-length")) == len(r.body)


def test_each_representation_has_its_own_etag(compress_server):
    tags = {fetch_coded(compress_server, "/s/app.css", accept).header("etag") for accept in ("br", "zstd", "gzip", "identity")}
    assert len(tags) == 4
    br = fetch_coded(compress_server, "/s/app.css", "br")
    r = fetch_coded(compress_server, "/s/app.css", "br", {"if-none-match": br.header("etag")})
    assert r.status == 304 and r.header("vary") == "accept-encoding"
    assert fetch_coded(compress_server, "/s/app.css", "gzip", {"if-none-match": br.header("etag")}).status == 200


def test_only_existing_siblings_are_offered(compress_server):
    assert fetch_coded(compress_server, "/s/gz-only.js", "br, gzip").header("content-encoding") == "gzip"
    assert fetch_coded(compress_server, "/s/gz-only.js", "br").header("content-encoding") is None
    r = fetch_coded(compress_server, "/s/plain.txt", "br, gzip")
    assert r.header("content-encoding") is None and r.header("vary") is None  # no sibling, nothing varies


def test_stale_sibling_is_ignored(compress_server, precompressed):
    _, text = precompressed
    r = fetch_coded(compress_server, "/s/stale.txt", "gzip")
    assert r.header("content-encoding") is None and r.body == text


def test_sibling_symlink_outside_the_root_is_ignored(compress_server, precompressed):
    _, text = precompressed
    r = fetch_coded(compress_server, "/s/linked.txt", "gzip")
    assert r.header("content-encoding") is None and r.body == text


def test_ranges_apply_to_the_sibling_bytes(compress_server, precompressed):
    root, _ = precompressed
    coded = (root / "app.css.gz").read_bytes()
    r = fetch_coded(compress_server, "/s/app.css", "gzip", {"range": "bytes=0-9"})
    assert r.status == 206 and r.header("content-encoding") == "gzip"
    assert r.header("content-range") == "bytes 0-9/%d" % len(coded)
    assert r.body == coded[:10]
    r = fetch_coded(compress_server, "/s/app.css", "gzip", {"range": "bytes=%d-" % len(coded)})
    assert r.status == 416 and r.header("content-range") == "bytes */%d" % len(coded)


def test_curl_compressed_decodes_the_sibling(compress_server, precompressed):
    _, text = precompressed
    out = subprocess.run(["curl", "-sf", "--compressed", compress_server.url + "/s/app.css"],
                         check=True, timeout=30, stdout=subprocess.PIPE).stdout
    assert out == text


def test_compress_static_needs_static_dir(start_server):
    s = start_server(APP, "--compress-static", wait=False)
    assert s.wait_exit() == 2
    assert "--compress-static" in s.complete_output()
