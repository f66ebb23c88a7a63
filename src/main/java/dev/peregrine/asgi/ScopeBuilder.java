package dev.peregrine.asgi;

import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.PercentDecoder;
import dev.peregrine.python.InternTable;
import dev.peregrine.python.InternedStrings;
import dev.peregrine.python.Py;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.webtransport.WebTransportSession;
import io.netty.util.NetUtil;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;

/**
 * Builds the ASGI HTTP scope of a request: a copy of a template holding what every scope shares,
 * plus the request's own entries made straight from the bytes of its head. Python thread only.
 */
final class ScopeBuilder {
    private final MemorySegment template;
    private final MemorySegment kHttpVersion = Py.internedStr("http_version");
    private final MemorySegment kMethod = Py.internedStr("method");
    private final MemorySegment kScheme = Py.internedStr("scheme");
    private final MemorySegment kPath = Py.internedStr("path");
    private final MemorySegment kRawPath = Py.internedStr("raw_path");
    private final MemorySegment kQueryString = Py.internedStr("query_string");
    private final MemorySegment kHeaders = Py.internedStr("headers");
    private final MemorySegment kClient = Py.internedStr("client");
    private final MemorySegment kServer = Py.internedStr("server");
    private final MemorySegment kState = Py.internedStr("state");
    private final MemorySegment kType = Py.internedStr("type");
    private final MemorySegment kWebSocket = Py.internedStr("websocket");
    private final MemorySegment kSubprotocols = Py.internedStr("subprotocols");
    private final MemorySegment kExtensions = Py.internedStr("extensions");
    private final MemorySegment kWebTransport = Py.internedStr("webtransport");
    /** What a WebSocket scope advertises: the denial response, so that frameworks let applications send one. */
    private final MemorySegment webSocketExtensions = Py.newDict();
    /** What an HTTP scope advertises: http.response.pathsend, a file the server sends itself (sendfile where it can). */
    private final MemorySegment httpExtensions = Py.newDict();
    private final InternedStrings constants = new InternedStrings();
    private final InternTable headerNames = new InternTable(Py::bytes);
    private final byte[] rootPath;
    private MemorySegment state;
    private InetSocketAddress lastServer;
    private MemorySegment lastServerTuple;

    ScopeBuilder(String rootPath) {
        this.rootPath = rootPath.getBytes(StandardCharsets.UTF_8);
        template = Py.newDict();
        MemorySegment asgi = Py.newDict();
        Py.dictSetSteal(asgi, Py.internedStr("version"), Py.str("3.0"));
        Py.dictSetSteal(asgi, Py.internedStr("spec_version"), Py.str("2.4"));
        Py.dictSetSteal(template, Py.internedStr("type"), Py.internedStr("http"));
        Py.dictSetSteal(template, Py.internedStr("asgi"), asgi);
        Py.dictSetSteal(template, Py.internedStr("root_path"), Py.str(rootPath));
        Py.dictSetSteal(webSocketExtensions, Py.internedStr("websocket.http.response"), Py.newDict());
        Py.dictSetSteal(httpExtensions, Py.internedStr("http.response.pathsend"), Py.newDict());
    }

    /** The lifespan state, shallow-copied into every request's scope. */
    void useState(MemorySegment lifespanState) {
        state = Py.newRef(lifespanState);
    }

    /** The lifespan state (a borrowed reference); set once the loop is ready. */
    MemorySegment state() {
        return state;
    }

    MemorySegment build(HttpExchange exchange) {
        MemorySegment scope = common(exchange.head(), exchange.httpVersion(), exchange.scheme(), exchange.remoteAddress(), exchange.localAddress());
        Py.dictSet(scope, kMethod, constants.get(exchange.head().method()));
        Py.dictSetSteal(scope, kExtensions, Py.dictCopy(httpExtensions));
        return scope;
    }

    /** The scope of a WebSocket connection: no method, a ws/wss scheme, and the subprotocols the client offers. */
    MemorySegment buildWebSocket(WebSocketConnection connection) {
        MemorySegment scope = common(connection.head(), connection.httpVersion(), connection.scheme(), connection.remoteAddress(),
                connection.localAddress());
        Py.dictSet(scope, kType, kWebSocket);
        List<String> offered = connection.subprotocols();
        MemorySegment subprotocols = Py.newList(offered.size());
        for (int i = 0; i < offered.size(); i++) Py.listSetSteal(subprotocols, i, Py.str(offered.get(i)));
        Py.dictSetSteal(scope, kSubprotocols, subprotocols);
        Py.dictSetSteal(scope, kExtensions, Py.dictCopy(webSocketExtensions));
        return scope;
    }

    /** The scope of a WebTransport session (docs/WEBTRANSPORT.md): no method, scheme https. */
    MemorySegment buildWebTransport(WebTransportSession session) {
        MemorySegment scope = common(session.head(), session.httpVersion(), session.scheme(), session.remoteAddress(),
                session.localAddress());
        Py.dictSet(scope, kType, kWebTransport);
        // The extension itself, so that an application can tell a server that has it; a dict of its own per session.
        MemorySegment extensions = Py.newDict();
        Py.dictSetSteal(extensions, kWebTransport, Py.newDict());
        Py.dictSetSteal(scope, kExtensions, extensions);
        return scope;
    }

    private MemorySegment common(HttpRequestHead head, String httpVersion, String scheme, InetSocketAddress client, InetSocketAddress local) {
        byte[] bytes = head.bytes();
        MemorySegment scope = Py.dictCopy(template);
        Py.dictSet(scope, kHttpVersion, constants.get(httpVersion));
        Py.dictSet(scope, kScheme, constants.get(scheme));

        int pathStart = head.pathStart(), pathLength = head.pathLength();
        byte[] decoded = PercentDecoder.decode(bytes, pathStart, pathLength);
        MemorySegment path = decoded == null ? Py.utf8(bytes, pathStart, pathLength) : Py.utf8(decoded, 0, decoded.length);
        MemorySegment rawPath = Py.bytes(bytes, pathStart, pathLength);
        if (rootPath.length > 0) {
            path = prefixed(path, decoded == null ? Arrays.copyOfRange(bytes, pathStart, pathStart + pathLength) : decoded, true);
            rawPath = prefixed(rawPath, Arrays.copyOfRange(bytes, pathStart, pathStart + pathLength), false);
        }
        Py.dictSetSteal(scope, kPath, path);
        Py.dictSetSteal(scope, kRawPath, rawPath);
        Py.dictSetSteal(scope, kQueryString, Py.bytes(bytes, head.queryStart(), head.queryLength()));

        int count = head.headerCount();
        MemorySegment headers = Py.newList(count);
        for (int i = 0; i < count; i++) {
            MemorySegment name = headerNames.get(bytes, head.nameStart(i), head.nameLength(i));
            MemorySegment value = Py.bytes(bytes, head.valueStart(i), head.valueLength(i));
            Py.listSetSteal(headers, i, Py.tuple2(name, value));
        }
        Py.dictSetSteal(scope, kHeaders, headers);

        Py.dictSetSteal(scope, kClient, client == null ? Py.newRef(Py.None) : address(client));
        Py.dictSet(scope, kServer, server(local));
        Py.dictSetSteal(scope, kState, state == null ? Py.newDict() : Py.dictCopy(state));
        return scope;
    }

    /** root_path + path, as uvicorn reports it: the full path the client asked for. */
    private MemorySegment prefixed(MemorySegment withoutRoot, byte[] pathBytes, boolean text) {
        Py.decRef(withoutRoot);
        byte[] full = new byte[rootPath.length + pathBytes.length];
        System.arraycopy(rootPath, 0, full, 0, rootPath.length);
        System.arraycopy(pathBytes, 0, full, rootPath.length, pathBytes.length);
        return text ? Py.utf8(full, 0, full.length) : Py.bytes(full, 0, full.length);
    }

    private MemorySegment server(InetSocketAddress local) {
        if (local == null) return Py.None;
        if (!local.equals(lastServer)) {
            if (lastServerTuple != null) Py.decRef(lastServerTuple);
            lastServer = local;
            lastServerTuple = address(local);
        }
        return lastServerTuple;
    }

    private static MemorySegment address(InetSocketAddress address) {
        // RFC 5952 text (::1, not 0:0:0:0:0:0:0:1), as uvicorn reports addresses.
        return Py.tuple2(Py.str(NetUtil.toAddressString(address.getAddress())), Py.integer(address.getPort()));
    }
}
