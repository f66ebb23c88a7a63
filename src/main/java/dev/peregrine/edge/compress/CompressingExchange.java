package dev.peregrine.edge.compress;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.edge.ExchangeWrapper;
import dev.peregrine.http.BodyReceiver;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.metrics.RequestMetrics;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import org.jboss.logging.Logger;

/**
 * One response on its way out through --compress. Every send moves to the I/O thread (the application's
 * thread only hands it over, counted against the connection's high-water mark like any send); the first
 * one decides from the response head whether to compress, and each piece is compressed and flushed as
 * it comes, so that streaming responses stay streaming. The compressor exists from the head that
 * needs it until the last piece, the abort or the disconnect, so an idle keep-alive connection holds none.
 */
final class CompressingExchange extends ExchangeWrapper {
    private static final Logger LOG = Logger.getLogger(CompressingExchange.class);

    /** The coding Accept-Encoding chose, or null for identity. */
    private final ContentCoding coding;
    private final int minSize;
    private final boolean headRequest;
    /** The request's If-None-Match on a GET or HEAD, or null. */
    private final String ifNoneMatch;
    private final RequestMetrics metrics;
    // The fields below are touched on the I/O thread only.
    private boolean decided;
    private StreamCompressor compressor;
    /** The application's 200 became a 304: its body is dropped. */
    private boolean notModified;

    CompressingExchange(HttpExchange wrapped, ContentCoding coding, int minSize, String ifNoneMatch, RequestMetrics metrics) {
        super(wrapped);
        this.metrics = metrics;
        this.coding = coding;
        this.minSize = minSize;
        String method = wrapped.head().method();
        this.headRequest = method.equals("HEAD");
        this.ifNoneMatch = headRequest || method.equals("GET") ? ifNoneMatch : null;
    }

    @Override
    public void send(ResponseHead head, ByteBuf body, boolean last, WakeupBatch batch) {
        wrapped.runOnLoop(() -> sendOnLoop(head, body, last), body == null ? 0 : body.readableBytes(), batch);
    }

    private void sendOnLoop(ResponseHead head, ByteBuf body, boolean last) {
        if (head != null && !decided) {
            decided = true;
            head = decide(head, body, last);
        }
        if (notModified) {
            if (body != null) body.release();
            wrapped.send(head, null, last);
            return;
        }
        if (compressor == null) {
            wrapped.send(head, body, last);
            return;
        }
        ByteBuf out;
        try {
            out = compressor.compress(body, last, ByteBufAllocator.DEFAULT);
        } catch (RuntimeException e) {
            LOG.errorf(e, "compressing a response failed");
            closeCompressor();
            wrapped.abort();
            return;
        }
        if (last || wrapped.disconnected()) closeCompressor();
        wrapped.send(head, out, last);
    }

    /** The head to send: the application's, or rewritten for the compressed body; sets {@link #compressor}. */
    private ResponseHead decide(ResponseHead head, ByteBuf body, boolean last) {
        long size = head.contentLength() >= 0 ? head.contentLength() : last && !headRequest ? readable(body) : -1;
        if (!CompressionRules.eligible(head, size, minSize)) return head;
        if (coding == null) return CompressionRules.withVary(head);
        ResponseHead compressed = CompressionRules.compressed(head, coding);
        // The client sends back the weak tag it was given, which an application comparing tags strongly
        // (or as strings) would never match: the server compares weakly for it (RFC 9110 §13.1.2).
        if (head.status() == 200 && ifNoneMatch != null && EntityTags.weakMatch(ifNoneMatch, CompressionRules.etag(compressed))) {
            notModified = true;
            return CompressionRules.notModified(compressed);
        }
        if (!headRequest && !wrapped.disconnected()) {
            compressor = StreamCompressor.create(coding);
            metrics.compressed();
        }
        return compressed;
    }

    private static long readable(ByteBuf body) {
        return body == null ? 0 : body.readableBytes();
    }

    @Override
    public void abort() {
        wrapped.runOnLoop(this::closeCompressor, 0, null);
        wrapped.abort();
    }

    @Override
    public void receiveBody(BodyReceiver receiver) {
        wrapped.receiveBody(new BodyReceiver() {
            @Override public void onBody(ByteBuf data) { receiver.onBody(data); }
            @Override public void onBodyEnd() { receiver.onBodyEnd(); }

            @Override
            public void onDisconnect() {
                closeCompressor();
                receiver.onDisconnect();
            }
        });
    }

    private void closeCompressor() {
        if (compressor != null) compressor.close();
        compressor = null;
    }
}
