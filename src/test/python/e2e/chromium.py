"""A small headless Chromium driver for the end-to-end tests: the HTTP/3 client of test_http3.py.

There is no Python HTTP/3 client on the test machines, so the requests are made by Chromium (Debian's
``chromium``), driven over the DevTools protocol through ``--remote-debugging-pipe``: Chromium reads
commands on its fd 3 and writes replies and events on its fd 4, each a JSON text ended by a NUL
byte. No websocket library is needed, so it works under every CPython the suite uses.

    with Chromium(force_quic=["127.0.0.1:8443"], spki_hashes=[spki_sha256_base64(cert_pem)]) as browser:
        page = browser.open("https://127.0.0.1:8443/")    # navigate; page.protocol is "h3" over QUIC
        r = page.fetch("/upload", method="POST", body=b"...")   # fetch() inside the page
        r.status, r.headers, r.body, r.sha256, r.protocol

* ``force_quic``: origins ("host:port", or "*" for every origin) that Chromium must reach over QUIC
  (``--origin-to-force-quic-on``); without it Chromium speaks HTTP/1.1 or HTTP/2 over TCP.
* ``spki_hashes``: certificates Chromium accepts although no root it knows signed them
  (``--ignore-certificate-errors-spki-list``): base64 of the SHA-256 of the DER SubjectPublicKeyInfo,
  which ``spki_sha256_base64`` computes from a PEM certificate with the ``openssl`` command.
* ``Page.fetch`` runs ``fetch()`` in the page (same origin as the navigation, ``cache: "no-store"``)
  and returns status, headers, body (or only its length and SHA-256, computed in the page by
  ``crypto.subtle``, for big downloads) and the protocol from the Resource Timing entry
  (``nextHopProtocol``: "h3", "h2", "http/1.1").  ``fetch_all`` starts many at once (one connection
  per origin: Chromium multiplexes them), ``start_fetch``/``finish_fetch`` leave one in flight, and
  ``Page.evaluate`` runs any expression.  ``browser.open(url, isolated=True)`` puts the page in a
  browser context of its own, hence on connections of its own.
* A fetch that fails raises ``DevToolsError`` with Chromium's net error (``Network.loadingFailed``) and
  how its QUIC connections were closed (from the net log Chromium writes into its profile), since
  the page itself learns only "Failed to fetch".
* ``close()`` sends ``Browser.close``, waits for the process, and kills its process group when it
  does not end; a failed start kills it too.  Every wait is bounded.
"""

import base64
import fcntl
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"


class DevToolsError(AssertionError):
    """A DevTools command failed, timed out, or the browser went away."""


def available():
    return os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)


def spki_sha256_base64(cert_pem_path):
    """base64(SHA-256(DER SubjectPublicKeyInfo)) of a PEM certificate: what
    --ignore-certificate-errors-spki-list takes."""
    pubkey = subprocess.run(
        ["openssl", "x509", "-in", str(cert_pem_path), "-noout", "-pubkey"],
        check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
    ).stdout
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "DER"],
        input=pubkey, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
    ).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode("ascii")


class FetchResult:
    """One fetch() made by the page."""

    def __init__(self, data):
        self.url = data["url"]
        self.status = data["status"]
        self.headers = {}  # lower-case name -> value (fetch joins repeated headers with ", ")
        for name, value in data["headers"]:
            self.headers[name.lower()] = value
        self.body = base64.b64decode(data["body"]) if data.get("body") is not None else None
        self.length = data["length"]
        self.sha256 = data["sha256"]
        self.protocol = data["protocol"]

    @property
    def text(self):
        return self.body.decode("utf-8")

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "<FetchResult %s %s %s length=%d body=%r>" % (
            self.status, self.protocol, self.url, self.length, (self.body or b"")[:200])


# Runs in the page: one fetch() described by `spec`, resolved to a plain object (returnByValue).
_FETCH_JS = r"""
async function __peregrineFetch(spec) {
  const init = {method: spec.method, headers: spec.headers, cache: "no-store", redirect: "manual"};
  if (spec.body !== null) {
    const raw = atob(spec.body);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    init.body = bytes;
  }
  const url = new URL(spec.url, location.href).href;
  const response = await fetch(url, init);
  const buffer = new Uint8Array(await response.arrayBuffer());
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", buffer));
  const hex = Array.from(digest, b => b.toString(16).padStart(2, "0")).join("");
  let body = null;
  if (spec.keepBody) {
    let s = "";
    for (let i = 0; i < buffer.length; i += 0x8000) s += String.fromCharCode.apply(null, buffer.subarray(i, i + 0x8000));
    body = btoa(s);
  }
  // The Resource Timing entry is queued once the body has been read: wait a little for it.
  let protocol = null;
  for (let i = 0; i < 200 && protocol === null; i++) {
    const entries = performance.getEntriesByName(url, "resource");
    if (entries.length) protocol = entries[entries.length - 1].nextHopProtocol;
    else await new Promise(r => setTimeout(r, 10));
  }
  return {url: url, status: response.status, headers: Array.from(response.headers.entries()),
          length: buffer.length, sha256: hex, body: body, protocol: protocol};
}
function __peregrineSettled(spec) {
  return __peregrineFetch(spec).then(v => ({ok: v}), e => ({error: spec.method + " " + spec.url + ": " + String(e)}));
}
"""


class Page:
    """One tab, attached with a flat session: commands go through Chromium.send(..., session)."""

    def __init__(self, browser, target_id, session_id, browser_context_id=None):
        self.browser = browser
        self.target_id = target_id
        self.session_id = session_id
        self.browser_context_id = browser_context_id
        self.protocol = None  # of the last navigation
        self.navigation_status = None

    def send(self, method, params=None, timeout=None):
        return self.browser.send(method, params, session=self.session_id, timeout=timeout)

    def navigate(self, url, timeout=None):
        """Load url, wait for its load event, and record the navigation's protocol and status.
        Raises DevToolsError with Chromium's error text (net::ERR_...) when the load fails."""
        result = self.send("Page.navigate", {"url": url}, timeout=timeout)
        if result.get("errorText"):
            raise DevToolsError("navigation to %s failed: %s" % (url, result["errorText"]))
        try:
            info = self._wait_for_load(timeout)
        except DevToolsError as e:
            raise DevToolsError("navigation to %s: the response started but the page did not finish loading: %s"
                                % (url, e))
        # a page whose fetches are numerous keeps every timing entry (the default buffer holds 250)
        self.evaluate("performance.setResourceTimingBufferSize(100000); " + _FETCH_JS + "; true")
        self.protocol = info["protocol"]
        self.navigation_status = info["status"]
        return info

    def _wait_for_load(self, timeout):
        return self.evaluate(
            """new Promise(resolve => {
                 const done = () => { const n = performance.getEntriesByType("navigation")[0];
                                      resolve({protocol: n ? n.nextHopProtocol : null,
                                               status: n && "responseStatus" in n ? n.responseStatus : null,
                                               href: location.href}); };
                 if (document.readyState === "complete") done(); else addEventListener("load", done);
               })""",
            timeout=timeout,
        )

    def evaluate(self, expression, await_promise=True, timeout=None):
        """The value of a JavaScript expression (awaited when it is a promise), as JSON-able data."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": await_promise, "returnByValue": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            description = details.get("exception", {}).get("description") or details.get("text")
            raise DevToolsError("JavaScript error: %s" % description)
        return result["result"].get("value")

    @staticmethod
    def fetch_spec(url, method="GET", headers=None, body=None, keep_body=True):
        if isinstance(body, str):
            body = body.encode("utf-8")
        return {
            "url": url,
            "method": method,
            "headers": [[n, v] for n, v in (headers.items() if isinstance(headers, dict) else headers or [])],
            "body": base64.b64encode(body).decode("ascii") if body is not None else None,
            "keepBody": keep_body,
        }

    def fetch(self, url, method="GET", headers=None, body=None, keep_body=True, timeout=None):
        """fetch(url) in the page (url relative to the page's), read to the end: a FetchResult.
        keep_body=False returns only the length and SHA-256 of the body."""
        return self.fetch_all([dict(url=url, method=method, headers=headers, body=body, keep_body=keep_body)],
                              timeout=timeout)[0]

    def fetch_all(self, specs, timeout=None):
        """Every fetch of `specs` (dicts of fetch_spec's arguments) started at once in the page; the
        FetchResults in the same order, once all have ended. A failed fetch raises DevToolsError with
        Chromium's reason (net::ERR_...)."""
        specs = [self.fetch_spec(**spec) for spec in specs]
        failures_before = len(self.browser.failures)
        outcomes = self.evaluate("Promise.all(%s.map(__peregrineSettled))" % json.dumps(specs), timeout=timeout)
        return self._results(outcomes, failures_before)

    def _results(self, outcomes, failures_before):
        failed = [(i, o["error"]) for i, o in enumerate(outcomes) if "error" in o]
        if failed:
            # the network events travel apart from the page's answer: a round trip lets them arrive
            time.sleep(0.2)
            self.browser.send("Browser.getVersion")
            network = [(url, error) for session, url, error in self.browser.failures[failures_before:]
                       if session == self.session_id]
            raise DevToolsError(
                "%d of %d fetches failed in the page, the first: #%d %s; network errors: %s; QUIC connections: %s"
                % (len(failed), len(outcomes), failed[0][0], failed[0][1], network[:5] or "none reported",
                   self.browser.quic_closes() or "no close recorded"))
        return [FetchResult(o["ok"]) for o in outcomes]

    def start_fetch(self, name, url, **kwargs):
        """Start a fetch without waiting for it; finish_fetch(name) waits for its FetchResult."""
        spec = self.fetch_spec(url, **kwargs)
        self._started = getattr(self, "_started", {})
        self._started[name] = len(self.browser.failures)
        self.evaluate(
            "window.__pending = window.__pending || {}; window.__pending[%s] = __peregrineSettled(%s); true"
            % (json.dumps(name), json.dumps(spec))
        )

    def finish_fetch(self, name, timeout=None):
        outcome = self.evaluate("window.__pending[%s]" % json.dumps(name), timeout=timeout)
        return self._results([outcome], self._started.pop(name))[0]

    def close(self):
        """Close the tab (and its browser context, if it has one of its own)."""
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target_id}, timeout=10)
            if self.browser_context_id:
                self.browser.send("Target.disposeBrowserContext", {"browserContextId": self.browser_context_id},
                                  timeout=10)
        except DevToolsError:
            pass


class Chromium:
    """A headless Chromium process driven over --remote-debugging-pipe."""

    def __init__(self, force_quic=(), spki_hashes=(), extra_args=(), binary=CHROMIUM, timeout=30.0, net_log=True):
        self.net_log = net_log
        self.force_quic = list(force_quic)
        self.spki_hashes = list(spki_hashes)
        self.extra_args = list(extra_args)
        self.binary = binary
        self.timeout = timeout
        self.proc = None
        self._profile = None
        self._to_browser = None  # our end of Chromium's fd 3
        self._from_browser = None  # our end of Chromium's fd 4
        self._buffer = bytearray()
        self._next_id = 0
        self._urls = {}  # (session, requestId) -> url, from Network.requestWillBeSent
        self.failures = []  # [(session, url, Chromium's net::ERR_... text)] from Network.loadingFailed
        self._stderr = None

    # -- lifecycle ---------------------------------------------------------
    def argv(self):
        args = [
            self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-extensions", "--disable-dev-shm-usage", "--mute-audio",
            "--user-data-dir=" + self._profile, "--remote-debugging-pipe",
        ]
        if self.force_quic:
            args += ["--enable-quic", "--origin-to-force-quic-on=" + ",".join(self.force_quic)]
        if self.spki_hashes:
            args.append("--ignore-certificate-errors-spki-list=" + ",".join(self.spki_hashes))
        if self.net_log:
            args.append("--log-net-log=" + os.path.join(self._profile, "netlog.json"))
        return args + self.extra_args + ["about:blank"]

    def start(self):
        self._profile = tempfile.mkdtemp(prefix="peregrine-chromium-")
        self._stderr = tempfile.TemporaryFile()
        to_r, to_w = os.pipe()
        from_r, from_w = os.pipe()
        # Chromium wants the pipe on its fds 3 and 4 exactly. The child's ends get numbers above 4
        # (so that moving one onto 3 or 4 cannot clobber the other) and close-on-exec; after the
        # fork they are duplicated onto 3 and 4, which stay open across exec. close_fds=False since
        # pass_fds cannot name 3 and 4 (they need not be open here); Python opens every file
        # non-inheritable anyway.
        child_in = fcntl.fcntl(to_r, fcntl.F_DUPFD_CLOEXEC, 5)
        child_out = fcntl.fcntl(from_w, fcntl.F_DUPFD_CLOEXEC, 5)
        os.close(to_r)
        os.close(from_w)

        def place_fds():
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        try:
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=self._stderr,
                stderr=self._stderr,
                close_fds=False,
                preexec_fn=place_fds,
                start_new_session=True,
            )
        except BaseException:
            os.close(to_w)
            os.close(from_r)
            raise
        finally:
            os.close(child_in)
            os.close(child_out)
        self._to_browser, self._from_browser = to_w, from_r
        try:
            self.version = self.send("Browser.getVersion")
        except BaseException:
            self.kill()
            raise
        return self

    def __enter__(self):
        return self.start() if self.proc is None else self

    def __exit__(self, *exc):
        self.close()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def close(self):
        """Browser.close, then wait for the process (killed if it does not end within 10 s)."""
        if self.proc is None:
            return
        try:
            if self.running():
                try:
                    self.send("Browser.close", timeout=10)
                except DevToolsError:
                    pass  # it may close the pipe before answering
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            self.kill()

    def kill(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_browser = self._from_browser = None
        if self._profile:
            shutil.rmtree(self._profile, ignore_errors=True)
            self._profile = None

    def output(self):
        """What Chromium wrote on stdout/stderr (for failure messages)."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")

    def quic_closes(self):
        """How Chromium's QUIC connections ended so far, from its net log (written a little behind):
        ["closed by the server|by Chromium: <details> (quic_error N)"], each reason once."""
        if not self.net_log or not self._profile:
            return []
        try:
            with open(os.path.join(self._profile, "netlog.json"), "rb") as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        # The file is {"constants": {...},\n"events": [\n{event},\n{event},\n... one event a line.
        if not lines or not lines[0].startswith(b'{"constants"'):
            return []
        try:
            constants = json.loads(lines[0].rstrip(b",") + b"}")["constants"]
        except ValueError:
            return []
        closed = constants["logEventTypes"].get("QUIC_SESSION_CLOSED")
        out = []
        for line in lines[2:]:
            if b"quic_error" not in line:
                continue
            try:
                event = json.loads(line.rstrip(b","))
            except ValueError:  # the last line of a finished log, or one being written
                continue
            if event.get("type") == closed:
                params = event.get("params", {})
                text = "closed by %s: %s (quic_error %s)" % (
                    "the server" if params.get("from_peer") else "Chromium", params.get("details"), params.get("quic_error"))
                if text not in out:
                    out.append(text)
        return out

    # -- the protocol ------------------------------------------------------
    def send(self, method, params=None, session=None, timeout=None):
        """Send one command and wait for its result (events arriving meanwhile are looked at by _event)."""
        if self._to_browser is None:
            raise DevToolsError("the browser is not running")
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode("utf-8") + b"\0"
        try:
            while data:
                written = os.write(self._to_browser, data)
                data = data[written:]
        except OSError as e:
            raise DevToolsError("cannot send %s to the browser: %s\n%s" % (method, e, self.output()[-2000:]))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline, method)
            if reply.get("id") == message["id"]:
                if "error" in reply:
                    raise DevToolsError("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            if "method" in reply:
                self._event(reply)

    def _event(self, message):
        # Only the network errors are kept: fetch() in the page says no more than "Failed to fetch".
        method, params, session = message["method"], message.get("params", {}), message.get("sessionId")
        if method == "Network.requestWillBeSent":
            self._urls[(session, params["requestId"])] = params["request"]["url"]
        elif method == "Network.loadingFailed":
            url = self._urls.pop((session, params["requestId"]), "?")
            self.failures.append((session, url, params.get("errorText", "") + (
                " (%s)" % params["blockedReason"] if params.get("blockedReason") else "")))
        elif method == "Network.loadingFinished":
            self._urls.pop((session, params["requestId"]), None)

    def _read_message(self, deadline, waiting_for):
        while True:
            end = self._buffer.find(b"\0")
            if end >= 0:
                raw = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return json.loads(raw)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DevToolsError("no reply to %s within the time limit" % waiting_for)
            ready, _, _ = select.select([self._from_browser], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise DevToolsError(
                    "the browser closed the DevTools pipe while waiting for %s (exit status %r)\n%s"
                    % (waiting_for, self.proc.poll(), self.output()[-2000:]))
            self._buffer += chunk

    # -- pages -------------------------------------------------------------
    def new_page(self, isolated=False):
        """A blank page. isolated: in a browser context of its own (like an incognito window), whose
        network state, hence connections, it shares with no other page."""
        context = self.send("Target.createBrowserContext")["browserContextId"] if isolated else None
        params = {"url": "about:blank"}
        if context:
            params["browserContextId"] = context
        target = self.send("Target.createTarget", params)["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, target, session, context)
        page.send("Page.enable")
        page.send("Runtime.enable")
        page.send("Network.enable")
        return page

    def open(self, url, isolated=False, timeout=None):
        """A new page with url loaded (see Page.navigate)."""
        page = self.new_page(isolated)
        try:
            page.navigate(url, timeout=timeout)
        except BaseException:
            page.close()
            raise
        return page

