package dev.peregrine.wsgi;

import dev.peregrine.config.Version;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.PercentDecoder;
import dev.peregrine.python.InternTable;
import dev.peregrine.python.InternedStrings;
import dev.peregrine.python.Py;

import io.netty.util.NetUtil;

import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Builds the PEP 3333 environ: a copy of a template with the constant keys, plus the request's own
 * entries as "native strings" (ISO-8859-1) made straight from the bytes of its head. Repeated headers
 * are folded into one value. Used with the GIL held.
 */
final class EnvironBuilder {
    private final MemorySegment template;
    private final byte[] rootPath;
    private final MemorySegment kMethod = Py.internedStr("REQUEST_METHOD");
    private final MemorySegment kPathInfo = Py.internedStr("PATH_INFO");
    private final MemorySegment kQueryString = Py.internedStr("QUERY_STRING");
    private final MemorySegment kProtocol = Py.internedStr("SERVER_PROTOCOL");
    private final MemorySegment kServerName = Py.internedStr("SERVER_NAME");
    private final MemorySegment kServerPort = Py.internedStr("SERVER_PORT");
    private final MemorySegment kRemoteAddr = Py.internedStr("REMOTE_ADDR");
    private final MemorySegment kRemotePort = Py.internedStr("REMOTE_PORT");
    private final MemorySegment kScheme = Py.internedStr("wsgi.url_scheme");
    private final MemorySegment kInput = Py.internedStr("wsgi.input");
    private final MemorySegment kContentLength = Py.internedStr("CONTENT_LENGTH");
    private final InternedStrings constants = new InternedStrings();
    /** "user-agent" becomes HTTP_USER_AGENT; content-type and content-length lose the prefix. */
    private final InternTable keys = new InternTable(EnvironBuilder::environKey);

    EnvironBuilder(String rootPath, boolean multithread, MemorySegment errors, MemorySegment fileWrapper) {
        this.rootPath = rootPath.getBytes(StandardCharsets.UTF_8);
        template = Py.newDict();
        MemorySegment version = Py.tuple2(Py.integer(1), Py.integer(0));
        Py.dictSetSteal(template, Py.internedStr("wsgi.version"), version);
        Py.dictSet(template, Py.internedStr("wsgi.errors"), errors);
        Py.dictSet(template, Py.internedStr("wsgi.multithread"), multithread ? Py.True : Py.False);
        Py.dictSet(template, Py.internedStr("wsgi.multiprocess"), Py.False);
        Py.dictSet(template, Py.internedStr("wsgi.run_once"), Py.False);
        Py.dictSet(template, Py.internedStr("wsgi.file_wrapper"), fileWrapper);
        // wsgi.input returns b"" at the end of the body, with or without Content-Length; without this
        // Werkzeug (Flask) reads nothing of a body that has no Content-Length (chunked, HTTP/2).
        Py.dictSet(template, Py.internedStr("wsgi.input_terminated"), Py.True);
        Py.dictSetSteal(template, Py.internedStr("SCRIPT_NAME"), Py.latin1(this.rootPath, 0, this.rootPath.length));
        Py.dictSetSteal(template, Py.internedStr("SERVER_SOFTWARE"), Py.str("peregrine/" + Version.VERSION));
    }

    private static MemorySegment environKey(byte[] data, int offset, int length) {
        boolean plain = equals(data, offset, length, "content-type") || equals(data, offset, length, "content-length");
        byte[] key = new byte[length + (plain ? 0 : 5)];
        int k = 0;
        if (!plain) for (byte b : "HTTP_".getBytes(StandardCharsets.US_ASCII)) key[k++] = b;
        for (int i = offset; i < offset + length; i++) {
            byte b = data[i];
            key[k++] = b == '-' ? (byte) '_' : (b >= 'a' && b <= 'z') ? (byte) (b - 32) : b;
        }
        return Py.latin1(key, 0, key.length);
    }

    private static boolean equals(byte[] data, int offset, int length, String ascii) {
        if (length != ascii.length()) return false;
        for (int i = 0; i < length; i++) if (data[offset + i] != ascii.charAt(i)) return false;
        return true;
    }

    /**
     * {@code completeLength}: the size of the body when it was read whole before the call (in memory or
     * spooled), else -1. A body without Content-Length that was read whole gets one, as waitress does:
     * Django reads only CONTENT_LENGTH bytes of wsgi.input, and would see a chunked upload as empty.
     */
    MemorySegment build(HttpExchange exchange, MemorySegment input, long completeLength) {
        HttpRequestHead head = exchange.head();
        byte[] bytes = head.bytes();
        MemorySegment environ = Py.dictCopy(template);
        Py.dictSet(environ, kMethod, constants.get(head.method()));
        Py.dictSet(environ, kProtocol, constants.get(serverProtocol(exchange.httpVersion())));
        Py.dictSet(environ, kScheme, constants.get(exchange.scheme()));
        Py.dictSetSteal(environ, kInput, input);

        int pathStart = head.pathStart(), pathLength = head.pathLength();
        byte[] path = PercentDecoder.decode(bytes, pathStart, pathLength);
        int from = 0, length = pathLength;
        if (path == null) {
            path = bytes;
            from = pathStart;
        } else {
            length = path.length;
        }
        // Behind a proxy that forwards the prefix, PATH_INFO is what follows SCRIPT_NAME.
        if (rootPath.length > 0 && length >= rootPath.length
                && Arrays.equals(path, from, from + rootPath.length, rootPath, 0, rootPath.length)
                && (length == rootPath.length || path[from + rootPath.length] == '/')) {
            from += rootPath.length;
            length -= rootPath.length;
        }
        Py.dictSetSteal(environ, kPathInfo, Py.latin1(path, from, length));
        Py.dictSetSteal(environ, kQueryString, Py.latin1(bytes, head.queryStart(), head.queryLength()));

        InetSocketAddress local = exchange.localAddress();
        Py.dictSet(environ, kServerName, constants.get(local == null ? "localhost" : local.getAddress().getHostAddress()));
        Py.dictSet(environ, kServerPort, constants.get(local == null ? "0" : Integer.toString(local.getPort())));
        InetSocketAddress remote = exchange.remoteAddress();
        if (remote != null) {
            Py.dictSetSteal(environ, kRemoteAddr, Py.str(NetUtil.toAddressString(remote.getAddress())));
            Py.dictSetSteal(environ, kRemotePort, Py.str(Integer.toString(remote.getPort())));
        }
        addHeaders(environ, head, bytes);
        if (completeLength > 0 && head.contentLength() < 0) {
            Py.dictSetSteal(environ, kContentLength, Py.str(Long.toString(completeLength)));
        }
        return environ;
    }

    private void addHeaders(MemorySegment environ, HttpRequestHead head, byte[] bytes) {
        int count = head.headerCount();
        boolean[] folded = null;
        for (int i = 0; i < count; i++) {
            if (folded != null && folded[i]) continue;
            int nameStart = head.nameStart(i), nameLength = head.nameLength(i);
            int duplicates = 0;
            for (int j = i + 1; j < count; j++) {
                if (sameName(bytes, head, i, j)) duplicates++;
            }
            MemorySegment key = keys.get(bytes, nameStart, nameLength);
            MemorySegment value;
            if (duplicates == 0) {
                value = Py.latin1(bytes, head.valueStart(i), head.valueLength(i));
            } else {
                if (folded == null) folded = new boolean[count];
                // PEP 3333 folds repeated headers with commas; cookies are joined as a browser sends them.
                String separator = equals(bytes, nameStart, nameLength, "cookie") ? "; " : ", ";
                StringBuilder joined = new StringBuilder(new String(bytes, head.valueStart(i), head.valueLength(i), StandardCharsets.ISO_8859_1));
                for (int j = i + 1; j < count; j++) {
                    if (!sameName(bytes, head, i, j)) continue;
                    folded[j] = true;
                    joined.append(separator).append(new String(bytes, head.valueStart(j), head.valueLength(j), StandardCharsets.ISO_8859_1));
                }
                byte[] text = joined.toString().getBytes(StandardCharsets.ISO_8859_1);
                value = Py.latin1(text, 0, text.length);
            }
            Py.dictSetSteal(environ, key, value);
            Py.decRef(key);
        }
    }

    private static boolean sameName(byte[] bytes, HttpRequestHead head, int i, int j) {
        int a = head.nameStart(i), n = head.nameLength(i), b = head.nameStart(j);
        return n == head.nameLength(j) && Arrays.equals(bytes, a, a + n, bytes, b, b + n);
    }

    /** SERVER_PROTOCOL without building a string per request on the Python thread. */
    private static String serverProtocol(String httpVersion) {
        return switch (httpVersion) {
            case "1.1" -> "HTTP/1.1";
            case "2" -> "HTTP/2";
            case "3" -> "HTTP/3";
            case "1.0" -> "HTTP/1.0";
            default -> "HTTP/" + httpVersion;
        };
    }
}
