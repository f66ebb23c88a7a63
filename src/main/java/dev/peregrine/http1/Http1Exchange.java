package dev.peregrine.http1;

import dev.peregrine.http.FileBody;
import dev.peregrine.http.FileSender;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.LoopExchange;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.DefaultFileRegion;
import io.netty.handler.ssl.SslHandler;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * The transport side of one request on an HTTP/1.1 connection: its body as the application asks for it,
 * and its response framed by {@link ResponseEncoder}. Everything runs on the connection's I/O thread
 * except what {@link LoopExchange} hands over to it.
 */
final class Http1Exchange extends LoopExchange {
    /** A file region up to this size goes out in the same write as the head, read rather than sendfile'd. */
    static final int INLINE_FILE_BYTES = 16 * 1024;
    /** A body part up to this size is copied into the head's buffer rather than written beside it. */
    private static final int INLINE_BODY_BYTES = 2 * 1024;
    /** Unread body smaller than this that is already buffered is skipped to keep the connection. */
    private static final int SKIPPABLE_BODY = 64 * 1024;

    private final Http1Connection connection;
    private final ChannelHandlerContext ctx;
    private final RequestHead head;
    private boolean demanded;
    private boolean bodyEnded;
    private boolean endDelivered;
    private long bodyRemaining;
    private long bodyReceived;
    private boolean continueSent;
    private boolean done;
    // Response state, touched only on the I/O thread.
    private boolean headSent;
    private int status;
    private long bytesSent;
    private ResponseEncoder.Framing framing;
    private boolean keepAlive;
    /** Bytes of the declared Content-Length not yet sent; maintained by the framing. */
    long lengthLeft;

    Http1Exchange(Http1Connection connection, ChannelHandlerContext ctx, RequestHead head, InetSocketAddress peer, long startNanos) {
        super(ctx.channel(), peer, connection.settings().scheme(), startNanos);
        this.connection = connection;
        this.ctx = ctx;
        this.head = head;
        this.bodyRemaining = head.chunked() ? -1 : Math.max(0, head.contentLength());
        this.bodyEnded = !head.chunked() && bodyRemaining == 0;
    }

    @Override public HttpRequestHead head() { return head; }
    @Override public String httpVersion() { return head.http11() ? "1.1" : "1.0"; }

    RequestHead requestHead() { return head; }
    int status() { return status; }
    long bytesSent() { return bytesSent; }
    long bodyReceived() { return bodyReceived; }
    /** Whether the response head went out: past that, a failure can only close the connection. */
    boolean headSent() { return headSent; }

    @Override
    public void demand() {
        onLoop(this::demandOnLoop);
    }

    private void demandOnLoop() {
        if (disconnected() || !connection.serves(this)) return;
        demanded = true;
        if (connection.readingBody()) pump();
    }

    /** Whether the whole body has been read off the wire: what the client sends next is the next request. */
    boolean bodyComplete() {
        return bodyEnded;
    }

    boolean waitingForClient() {
        return demanded && !bodyEnded;
    }

    /** Delivers buffered body to the receiver while it has asked for some; reads when it needs more. */
    void pump() {
        while (demanded && receiver() != null && connection.serves(this)) {
            if (bodyEnded) {
                if (!endDelivered) {
                    endDelivered = true;
                    demanded = false;
                    connection.bodyDelivered();
                    receiver().onBodyEnd();
                    connection.readAheadForClose();
                }
                return;
            }
            if (head.expectContinue() && !continueSent && head.http11()) {
                continueSent = true;
                ctx.writeAndFlush(ResponseEncoder.continueResponse());
            }
            if (!connection.hasBufferedInput()) {
                connection.read();
                return;
            }
            ByteBuf data;
            if (head.chunked()) {
                List<ByteBuf> pieces = new ArrayList<>(2);
                try {
                    bodyEnded = connection.decodeChunks(pieces);
                } catch (HttpParseException e) {
                    pieces.forEach(ByteBuf::release);
                    bodyError(e.status(), e.getMessage());
                    return;
                }
                if (pieces.isEmpty()) continue;
                data = pieces.size() == 1 ? pieces.get(0) : ctx.alloc().compositeBuffer(pieces.size()).addComponents(true, pieces);
            } else {
                data = connection.takeBody(bodyRemaining);
                bodyRemaining -= data.readableBytes();
                bodyEnded = bodyRemaining == 0;
            }
            bodyReceived += data.readableBytes();
            if (bodyReceived > connection.settings().maxBody()) {
                data.release();
                bodyError(413, "request body larger than --max-body");
                return;
            }
            demanded = false;
            receiver().onBody(data);
        }
    }

    /** The body broke its framing or its limit: answer it ourselves if we still can, and close. */
    private void bodyError(int status, String reason) {
        boolean answered = headSent;
        connection.drop(this);
        cutByServer();
        if (answered) {
            connection.close();
        } else {
            connection.refuse(Refusal.of(status, reason), head);
        }
    }

    @Override
    protected void onCut() {
        if (!done) {
            done = true;
            connection.core().connections().requestEnded();
        }
    }

    /**
     * After the response, the part of the body the application did not read is still on the wire.
     * Skips it when it is small and already here; false when the connection must close instead.
     */
    boolean discardUnreadBody() {
        if (bodyEnded) return true;
        if (head.chunked()) {
            List<ByteBuf> pieces = new ArrayList<>();
            try {
                return connection.decodeChunks(pieces);
            } catch (HttpParseException e) {
                return false;
            } finally {
                pieces.forEach(ByteBuf::release);
            }
        }
        return bodyRemaining <= SKIPPABLE_BODY && connection.skipBody(bodyRemaining);
    }

    @Override
    protected void write(ResponseHead responseHead, ByteBuf body, boolean last, int size) {
        if (disconnected() || done) {
            if (body != null) body.release();
            return;
        }
        ByteBufAllocator alloc = ctx.alloc();
        ByteBuf out;
        if (responseHead != null) {
            status = responseHead.status();
            framing = ResponseEncoder.framing(head, responseHead, last ? size : -1);
            lengthLeft = ResponseEncoder.declaredLength(responseHead, last ? size : -1);
            keepAlive = head.keepAlive() && !responseHead.connectionClose() && !connection.draining()
                    && framing != ResponseEncoder.Framing.UNTIL_CLOSE && connection.settings().keepAliveMillis() > 0;
            out = ResponseEncoder.head(alloc, head, responseHead, framing, keepAlive, last ? size : -1, requestIdHeader, connection.settings().tlsHeaders());
            headSent = true;
        } else {
            out = null;
        }
        ByteBuf framed = body == null ? null : framing.frame(alloc, body, this);
        if (framed != null) bytesSent += framed.readableBytes();
        if (out != null && framed != null && framed.readableBytes() <= INLINE_BODY_BYTES) {
            // Into the head's own buffer: one buffer and one write. A composite of the direct head and a
            // small body from the heap (NativeBuffers) would make Netty copy both into a new buffer anyway.
            out.writeBytes(framed);
            framed.release();
            framed = null;
        }
        if (last) {
            ByteBuf trailer = framing.end(alloc, this);
            if (framing.incomplete(this)) keepAlive = false; // fewer bytes than the declared Content-Length
            out = append(alloc, out, framed);
            out = append(alloc, out, trailer);
            done = true;
            boolean reuse = keepAlive;
            if (out != null) ctx.writeAndFlush(out);
            else ctx.flush();
            connection.finished(this, reuse);
        } else {
            out = append(alloc, out, framed);
            if (out != null) ctx.writeAndFlush(out);
        }
    }

    /**
     * Without TLS, a body that is one region of a file is handed to Netty as a {@link DefaultFileRegion}:
     * the kernel copies it from the page cache to the socket (sendfile), and the file is never read
     * into the JVM. A region of at most {@link #INLINE_FILE_BYTES} is read into the head's write instead:
     * head and body then leave in one syscall and one TCP segment, where sendfile would need a second
     * of each (nginx gets the same from TCP_CORK, its tcp_nopush). With TLS, or for several regions,
     * the file is read in chunks ({@link FileSender}).
     */
    @Override
    public void sendFile(ResponseHead responseHead, FileBody body) {
        onLoop(() -> {
            FileBody.Region region = body.singleRegion();
            if (region == null || ctx.pipeline().get(SslHandler.class) != null) {
                FileSender.send(this, responseHead, body);
                return;
            }
            if (region.length() <= INLINE_FILE_BYTES && region.length() > 0) {
                ByteBuf bytes = ctx.alloc().directBuffer((int) region.length());
                try {
                    // A file that shrank gives fewer bytes than the head declares: the connection then closes after them.
                    bytes.writeBytes(body.file(), region.offset(), (int) region.length());
                } catch (IOException e) {
                    bytes.release();
                    body.close();
                    abortOnLoop();
                    return;
                }
                body.close();
                write(responseHead, bytes, true, bytes.readableBytes());
                return;
            }
            write(responseHead, null, false, 0);
            if (disconnected() || done || framing != ResponseEncoder.Framing.LENGTH || region.length() == 0) {
                body.close();
            } else {
                long length = Math.min(region.length(), lengthLeft);
                lengthLeft -= length;
                bytesSent += length;
                // A file that shrank under sendfile fails the write: the connection closes, never sending other bytes.
                ctx.write(new DefaultFileRegion(body.file(), region.offset(), length)).addListener(ChannelFutureListener.CLOSE_ON_FAILURE);
            }
            write(null, null, true, 0);
        });
    }

    private ByteBuf append(ByteBufAllocator alloc, ByteBuf first, ByteBuf second) {
        if (first == null) return second;
        if (second == null) return first;
        return alloc.compositeDirectBuffer(2).addComponents(true, first, second);
    }

    @Override
    public void abort() {
        onLoop(this::abortOnLoop);
    }

    private void abortOnLoop() {
        boolean wasCurrent = connection.serves(this);
        if (done && !wasCurrent) return;
        cut();
        if (wasCurrent) {
            connection.drop(this);
            connection.close();
        }
    }

    @Override
    public boolean writable() {
        return fewQueued() && ctx.channel().isWritable();
    }

    @Override
    protected boolean acceptsMore() {
        return disconnected() || ctx.channel().isWritable();
    }

    void writableAgain() {
        runWritableTasks();
    }
}
