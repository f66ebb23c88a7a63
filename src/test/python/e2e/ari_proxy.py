"""ACME Renewal Information (RFC 9773) in front of Pebble 2.4.0, Debian's, which has none.

``AriProxy`` is an HTTPS reverse proxy on loopback, run in the test's process, that forwards every
request to Pebble as it came: method, path, body and headers, the Host header too. Pebble builds
every URL it hands out (the directory's, an order's, a certificate's) from the Host header, so the
whole conversation goes through the proxy, and the signatures stay valid: the JWS ``url`` a client
signs is the proxy's, and Pebble checks it against that same Host. Issuance and tls-alpn-01
validation are Pebble's own. Only two things are added:

* the directory gets a ``renewalInfo`` URL (RFC 9773 3), and ``GET renewalInfo/<certID>`` is answered
  here with the ``suggestedWindow`` that ``window`` gives and a ``Retry-After`` (RFC 9773 4.2), or with
  a 500 while ``failing`` is set;
* the payload of each new-order request is decoded (a JWS's payload is base64url JSON) and kept in
  ``orders``, so a test can see the ``replaces`` field (RFC 9773 5); with ``refuse_replaces`` set, an
  order naming a certificate is answered as a CA answers one that was replaced already (409,
  ``alreadyReplaced``, with a fresh nonce of Pebble's), without reaching Pebble.

The proxy serves a certificate of the test root that Pebble's HTTPS uses too, so the one
``--acme-ca-bundle`` trusts both.
"""

import base64
import datetime
import http.client
import http.server
import json
import ssl
import threading
import time

# Per connection (RFC 9110 7.6.1), or recomputed here: never forwarded either way.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
              "content-length"}


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def serial_of_cert_id(cert_id):
    """The serial number a certID names (RFC 9773 4.1: base64url(AKI keyIdentifier) "." base64url(serial))."""
    return int.from_bytes(b64url_decode(cert_id.split(".", 1)[1]), "big")


def iso(moment):
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class AriProxy:
    def __init__(self, upstream_port, certfile, keyfile, cafile):
        self.upstream_port = upstream_port
        self.upstream_tls = ssl.create_default_context(cafile=cafile)
        # window(index, now): (start, end) datetimes for the index-th certificate asked about (0, 1, ...).
        self.window = lambda index, now: (now + datetime.timedelta(days=30), now + datetime.timedelta(days=31))
        self.retry_after = 3600
        self.failing = False
        self.refuse_replaces = False
        self.asked = []     # (certID, time.monotonic()) of each renewalInfo request, in order
        self.orders = []    # decoded new-order payloads, in order
        self.answered = []  # (certID, start, end) of each window served
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                proxy._handle(self)

            do_HEAD = do_POST = do_GET

            def log_message(self, *args):
                pass

        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(certfile, keyfile)
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="ari-proxy", daemon=True)
        self.thread.start()

    @property
    def directory(self):
        return "https://127.0.0.1:%d/dir" % self.port

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def cert_ids(self):
        """The certIDs asked about, each once, in the order first asked."""
        with self.lock:
            return list(dict.fromkeys(cert_id for cert_id, _ in self.asked))

    def asked_times(self, cert_id):
        with self.lock:
            return [at for asked, at in self.asked if asked == cert_id]

    def windows_for(self, cert_id):
        with self.lock:
            return [(start, end) for asked, start, end in self.answered if asked == cert_id]

    def _handle(self, request):
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        path = request.path
        if path.startswith("/renewalInfo/") and request.command == "GET":
            return self._renewal_info(request, path[len("/renewalInfo/"):])
        if path == "/order-plz" and request.command == "POST":
            payload = json.loads(b64url_decode(json.loads(body)["payload"]))
            with self.lock:
                self.orders.append(payload)
            if self.refuse_replaces and "replaces" in payload:
                return self._problem(request, 409, "alreadyReplaced", "the certificate %s was replaced already" % payload["replaces"],
                                     nonce=self._pebble_nonce(request))
        status, headers, content = self._forward(request, body, directory=(path == "/dir"))
        if path == "/dir" and status == 200:
            document = json.loads(content)
            document["renewalInfo"] = "https://%s/renewalInfo" % request.headers["Host"]
            content = json.dumps(document).encode()
        self._send(request, status, headers, content)

    def _forward(self, request, body, directory=False):
        upstream = http.client.HTTPSConnection("127.0.0.1", self.upstream_port, context=self.upstream_tls, timeout=30)
        try:
            upstream.putrequest(request.command, request.path, skip_host=True, skip_accept_encoding=True)
            for name, value in request.headers.items():
                # The directory is rewritten here, so it must come uncompressed.
                if name.lower() in HOP_BY_HOP or (directory and name.lower() == "accept-encoding"):
                    continue
                upstream.putheader(name, value)
            upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body)
            response = upstream.getresponse()
            content = b"" if request.command == "HEAD" else response.read()
            return response.status, [(n, v) for n, v in response.getheaders() if n.lower() not in HOP_BY_HOP], content
        finally:
            upstream.close()

    def _pebble_nonce(self, request):
        upstream = http.client.HTTPSConnection("127.0.0.1", self.upstream_port, context=self.upstream_tls, timeout=30)
        try:
            upstream.request("HEAD", "/nonce-plz", headers={"Host": request.headers["Host"]})
            return upstream.getresponse().getheader("Replay-Nonce")
        finally:
            upstream.close()

    def _renewal_info(self, request, cert_id):
        now = datetime.datetime.now(datetime.timezone.utc)
        with self.lock:
            self.asked.append((cert_id, time.monotonic()))
            failing = self.failing
        index = self.cert_ids().index(cert_id)
        if failing:
            return self._problem(request, 500, "serverInternal", "renewal information is unavailable")
        start, end = self.window(index, now)
        with self.lock:
            self.answered.append((cert_id, start, end))
        content = json.dumps({"suggestedWindow": {"start": iso(start), "end": iso(end)}}).encode()
        self._send(request, 200, [("Content-Type", "application/json"), ("Retry-After", str(self.retry_after))], content)

    def _problem(self, request, status, kind, detail, nonce=None):
        headers = [("Content-Type", "application/problem+json")]
        if nonce:
            headers.append(("Replay-Nonce", nonce))
        content = json.dumps({"type": "urn:ietf:params:acme:error:" + kind, "detail": detail, "status": status}).encode()
        self._send(request, status, headers, content)

    @staticmethod
    def _send(request, status, headers, content):
        request.send_response_only(status)
        for name, value in headers:
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(content)
