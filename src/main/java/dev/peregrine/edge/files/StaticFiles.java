package dev.peregrine.edge.files;

import dev.peregrine.config.EdgeSettings.StaticMount;
import dev.peregrine.edge.AcceptEncoding;
import dev.peregrine.edge.ContentCoding;
import dev.peregrine.edge.EdgeStage;
import dev.peregrine.http.Application;
import dev.peregrine.http.FileBody;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import io.netty.buffer.Unpooled;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The static-files stage (--static-dir): a request under a mount's prefix is answered from its
 * directory, on the I/O thread, and never reaches the application. Only GET and HEAD; validators,
 * preconditions and byte ranges as RFC 9110 has them; the body goes out through
 * {@link HttpExchange#sendFile}, so with sendfile on plain HTTP/1.1, except a file of at most 16 KiB,
 * which is sent from memory ({@link SafePaths#smallFileBytes}) in the same write as its head.
 *
 * <p>The disk is read on the I/O thread, as nginx does without its thread pools: a stat and an open of
 * a file in the page cache cost microseconds, less than a hand-over to another thread would.
 */
public final class StaticFiles implements EdgeStage {
    private static final byte[] NOT_FOUND = "Not Found\n".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] NOT_ALLOWED = "Method Not Allowed\n".getBytes(StandardCharsets.US_ASCII);

    private final List<Mount> mounts;
    /** --compress-static: a file's FILE.br, FILE.zst or FILE.gz is sent to clients that take it. */
    private final boolean compressStatic;

    /** A prefix as bytes, and its directory with its real path resolved once, at start. */
    private record Mount(byte[] prefix, SafePaths paths) {}

    public StaticFiles(List<StaticMount> mounts, boolean compressStatic) {
        this.compressStatic = compressStatic;
        List<Mount> resolved = new ArrayList<>();
        for (StaticMount mount : mounts) {
            try {
                resolved.add(new Mount(mount.prefix().equals("/") ? new byte[0] : mount.prefix().getBytes(StandardCharsets.UTF_8),
                        new SafePaths(mount.root().toRealPath())));
            } catch (IOException e) {
                throw new UncheckedIOException("--static-dir " + mount.prefix() + "=" + mount.root() + ": " + e.getMessage(), e);
            }
        }
        this.mounts = List.copyOf(resolved);
    }

    @Override
    public void handle(HttpExchange exchange, Application next) {
        HttpRequestHead head = exchange.head();
        byte[] bytes = head.bytes();
        int start = head.pathStart(), length = head.pathLength();
        for (Mount mount : mounts) {
            int p = mount.prefix().length;
            if (length < p || !Arrays.equals(bytes, start, start + p, mount.prefix(), 0, p)) continue;
            if (length > p && bytes[start + p] != '/') continue;
            serve(exchange, mount, start + p, length - p);
            return;
        }
        next.dispatch(exchange);
    }

    /** Answers the request for the part of the path after the prefix, data[restStart, restStart+restLength). */
    private void serve(HttpExchange exchange, Mount mount, int restStart, int restLength) {
        HttpRequestHead head = exchange.head();
        String method = head.method();
        boolean isHead = method.equals("HEAD");
        if (!isHead && !method.equals("GET")) {
            ResponseHead response = new ResponseHead(405);
            response.add("allow", "GET, HEAD");
            text(exchange, response, NOT_ALLOWED);
            return;
        }
        SafePaths.Found found = mount.paths().find(head.bytes(), restStart, restLength);
        if (found instanceof SafePaths.Directory) {
            redirectToSlash(exchange, head);
            return;
        }
        if (!(found instanceof SafePaths.File file)) {
            text(exchange, new ResponseHead(404), NOT_FOUND);
            return;
        }
        String contentType = MediaTypes.of(file.path().getFileName().toString());
        RequestHeaders headers = new RequestHeaders(head);
        if (!compressStatic) {
            respond(exchange, mount.paths(), headers, file, null, false, contentType, isHead);
            return;
        }
        Map<ContentCoding, SafePaths.File> siblings = mount.paths().precompressed(file);
        ContentCoding coding = siblings.isEmpty() ? null : AcceptEncoding.choose(headers.get("accept-encoding"), siblings.keySet());
        respond(exchange, mount.paths(), headers, coding == null ? file : siblings.get(coding), coding, !siblings.isEmpty(), contentType, isHead);
    }

    /**
     * Answers with {@code stat}, the representation chosen: the file itself, or its sibling precompressed
     * with {@code coding}. {@code varies}: the file has siblings, so every answer depends on Accept-Encoding.
     */
    private void respond(HttpExchange exchange, SafePaths paths, RequestHeaders headers, SafePaths.File stat, ContentCoding coding, boolean varies,
                         String contentType, boolean isHead) {
        Path path = stat.path();
        String etag = coding == null ? stat.etag() : stat.etag(coding.token());
        long modified = stat.modifiedSeconds();
        String lastModified = stat.lastModified();
        switch (Conditionals.evaluate(headers, etag, modified)) {
            case NOT_MODIFIED -> {
                ResponseHead response = new ResponseHead(304);
                response.add("etag", etag);
                response.add("last-modified", lastModified);
                if (varies) response.add("vary", "accept-encoding");
                exchange.send(response, null, true);
                return;
            }
            case PRECONDITION_FAILED -> {
                text(exchange, new ResponseHead(412), "Precondition Failed\n".getBytes(StandardCharsets.US_ASCII));
                return;
            }
            case PROCEED -> { }
        }
        long size = stat.size();
        ByteRanges.Outcome ranges = !isHead && Conditionals.rangeApplies(headers, etag, modified)
                ? ByteRanges.parse(headers.get("range"), size) : new ByteRanges.Whole();
        if (ranges instanceof ByteRanges.Unsatisfiable) {
            ResponseHead response = new ResponseHead(416);
            response.add("content-range", "bytes */" + size);
            if (varies) response.add("vary", "accept-encoding");
            text(exchange, response, "Range Not Satisfiable\n".getBytes(StandardCharsets.US_ASCII));
            return;
        }
        List<ByteRanges.Range> parts = ranges instanceof ByteRanges.Partial partial ? partial.ranges() : List.of();
        ResponseHead response = new ResponseHead(parts.isEmpty() ? 200 : 206);
        List<FileBody.Part> body = new ArrayList<>();
        if (parts.isEmpty()) {
            response.add("content-type", contentType);
            body.add(new FileBody.Region(0, size));
        } else if (parts.size() == 1) {
            ByteRanges.Range range = parts.getFirst();
            response.add("content-type", contentType);
            response.add("content-range", "bytes " + range.first() + "-" + range.last() + "/" + size);
            body.add(new FileBody.Region(range.first(), range.length()));
        } else {
            String boundary = Long.toHexString(ThreadLocalRandom.current().nextLong() | Long.MIN_VALUE);
            response.add("content-type", "multipart/byteranges; boundary=" + boundary);
            for (ByteRanges.Range range : parts) {
                body.add(new FileBody.Bytes(("\r\n--" + boundary + "\r\ncontent-type: " + contentType + "\r\ncontent-range: bytes "
                        + range.first() + "-" + range.last() + "/" + size + "\r\n\r\n").getBytes(StandardCharsets.ISO_8859_1)));
                body.add(new FileBody.Region(range.first(), range.length()));
            }
            body.add(new FileBody.Bytes(("\r\n--" + boundary + "--\r\n").getBytes(StandardCharsets.ISO_8859_1)));
        }
        long length = 0;
        for (FileBody.Part part : body) length += part.length();
        response.add("content-length", Long.toString(length));
        response.add("last-modified", lastModified);
        response.add("etag", etag);
        response.add("accept-ranges", "bytes");
        if (coding != null) response.add("content-encoding", coding.token());
        if (varies) response.add("vary", "accept-encoding");
        if (isHead) {
            exchange.send(response, null, true);
            return;
        }
        if (stat.size() <= SafePaths.SMALL_FILE && body.size() == 1 && body.getFirst() instanceof FileBody.Region region) {
            byte[] bytes = smallFileBytes(paths, stat);
            if (bytes != null) {
                exchange.send(response, Unpooled.wrappedBuffer(bytes, (int) region.offset(), (int) region.length()), true);
                return;
            }
        }
        FileChannel file;
        try {
            file = FileChannel.open(path, StandardOpenOption.READ);
        } catch (IOException e) {
            text(exchange, new ResponseHead(404), NOT_FOUND);
            return;
        }
        exchange.sendFile(response, new FileBody(file, List.copyOf(body)));
    }

    /** A small file's bytes from memory or disk; null when it cannot be read whole now (sent from disk instead). */
    private static byte[] smallFileBytes(SafePaths paths, SafePaths.File file) {
        try {
            return paths.smallFileBytes(file);
        } catch (IOException | SecurityException e) {
            return null;
        }
    }

    /** A directory asked without its slash: 301 to the same path with it, keeping the query. */
    private static void redirectToSlash(HttpExchange exchange, HttpRequestHead head) {
        byte[] bytes = head.bytes();
        StringBuilder location = new StringBuilder(new String(bytes, head.pathStart(), head.pathLength(), StandardCharsets.ISO_8859_1)).append('/');
        if (head.queryLength() > 0) location.append('?').append(new String(bytes, head.queryStart(), head.queryLength(), StandardCharsets.ISO_8859_1));
        ResponseHead response = new ResponseHead(301);
        response.add("location", location.toString());
        text(exchange, response, "Moved Permanently\n".getBytes(StandardCharsets.US_ASCII));
    }

    private static void text(HttpExchange exchange, ResponseHead response, byte[] text) {
        response.add("content-type", "text/plain; charset=utf-8");
        response.add("content-length", Integer.toString(text.length));
        exchange.send(response, exchange.head().method().equals("HEAD") ? null : Unpooled.wrappedBuffer(text), true);
    }
}
