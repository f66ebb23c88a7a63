package dev.peregrine.http3;

import dev.peregrine.http.FieldListRequests;
import dev.peregrine.http.ForwardedHeaders;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.websocket.HttpUpgrade;
import dev.peregrine.websocket.WebSocketConnection;
import dev.peregrine.webtransport.Varint;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelPromise;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.incubator.codec.http3.DefaultHttp3Headers;
import io.netty.incubator.codec.http3.Http3ErrorCode;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.util.ReferenceCountUtil;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;

/**
 * A WebSocket over HTTP/3 (RFC 9220): the extended CONNECT with {@code :protocol websocket} that
 * {@link ExtendedConnect} took away from Netty's HTTP/3 codec, and afterwards the HTTP/3 framing of its
 * stream. The QUIC stream is a channel already, so the WebSocket side runs in the stream's own pipeline,
 * the same as over HTTP/1.1, behind this handler: after the 200, DATA payloads go up as bytes and bytes
 * written go out as DATA frames.
 *
 * <p>The framing is by hand because the codec refuses the CONNECT's {@code :protocol} and, once it has
 * left the stream, only a DATA frame's type and length remain to be read and written.
 *
 * <p>Flow control follows reading as everywhere: with auto-read off, the stream is read only when the
 * WebSocket side asks, so a WebSocket the application does not read stops its client by QUIC's stream
 * window; writability is the QUIC stream's.
 */
final class Http3WebSocket extends ChannelDuplexHandler implements HttpUpgrade {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final long DATA = 0x00, HEADERS = 0x01;
    /** What a client may send before the answer that is held for the WebSocket; past it, the stream is not read until then. */
    private static final int EARLY_BYTES = 64 * 1024;

    private final Http3Connection connection;
    private final DefaultHttp3Headers fields;
    private ChannelHandlerContext ctx;
    private QuicStreamChannel channel;
    private HttpRequestHead head;
    private InetSocketAddress client;
    private long startNanos;
    /** Bytes read and not yet passed on: before the switch, everything; after it, an unfinished frame header. */
    private ByteBuf pending;
    /** After the switch: what is left of the DATA frame (or of a skipped frame) being read. */
    private long frameLeft;
    private boolean skipping;
    private boolean switched;
    private boolean answered;

    Http3WebSocket(Http3Connection connection, DefaultHttp3Headers fields) {
        this.connection = connection;
        this.fields = fields;
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.channel = (QuicStreamChannel) ctx.channel();
        this.startNanos = System.nanoTime();
        channel.config().setAutoRead(false);
        try {
            head = connection.requestHead(fields);
        } catch (FieldListRequests.Malformed e) {
            answered = true;
            channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
            return;
        }
        // Not yet: a FIN that came with the HEADERS is reported after them, within the same read, and such
        // a CONNECT is refused before the application hears of it (userEventTriggered).
        ctx.executor().execute(this::begin);
    }

    private void begin() {
        if (answered || !channel.isActive()) return;
        if (!connection.takesWebSockets()) {
            refuse(Refusal.of(501, "WebSocket is not supported"));
            return;
        }
        connection.decideUpgrade(head, ctx.executor(), (origin, refusal) -> {
            if (answered || !channel.isActive()) return; // ended while the answer came back from the shared store
            client = origin.client();
            if (refusal != null) {
                respond(refusal.head(), Unpooled.wrappedBuffer(refusal.body()));
                return;
            }
            open(origin);
        });
    }

    /** The handshake may proceed: the application hears of it. */
    private void open(ForwardedHeaders.Origin origin) {
        connection.webSocketOpened(channel);
        channel.closeFuture().addListener(closed -> connection.webSocketEnded(channel));
        WebSocketConnection webSocket = connection.webSocket(this, channel, head, origin.scheme(), client);
        // Before the accept the WebSocket side is not in the pipeline: it hears of a reset from here.
        // Deferred, so that a close code being handled when the channel closes reaches the application first.
        channel.closeFuture().addListener(closed -> ctx.executor().execute(webSocket::httpClosed));
        connection.startWebSocket(webSocket);
        if (channel.isActive()) ctx.read();
    }

    // ---- HttpUpgrade: the answer to the CONNECT ----

    @Override
    public void respond(ResponseHead response, ByteBuf body) {
        if (answered) { // refused already, for its stream's end
            if (body != null) body.release();
            return;
        }
        answered = true;
        int size = body == null ? 0 : body.readableBytes();
        writeAnswer(response, body);
        connection.upgradeAnswered(head, client, response.status(), size, startNanos);
    }

    /** A refusal of the server's own, not a handshake's answer: counted, as over HTTP/2, but not logged. */
    private void refuse(Refusal refusal) {
        answered = true;
        writeAnswer(refusal.head(), Unpooled.wrappedBuffer(refusal.body()));
        connection.refused(head, refusal.status(), startNanos, refusal.body().length);
    }

    /** A complete response, then the stream's end (Netty's close sends the FIN, and STOP_SENDING for a client still sending). */
    private void writeAnswer(ResponseHead response, ByteBuf body) {
        ConnectAnswers.write(ctx, connection, response, body).addListener(ChannelFutureListener.CLOSE);
    }

    @Override
    public ByteBuf switchProtocols(ResponseHead response) {
        if (answered) return Unpooled.EMPTY_BUFFER; // refused already, for its stream's end: the channel is closing
        answered = true;
        ctx.writeAndFlush(ConnectAnswers.headersFrame(ctx.alloc(), connection, response, -1));
        switched = true;
        connection.upgradeAnswered(head, client, response.status(), 0, startNanos);
        // What the client sent meanwhile comes back through this handler, now read as frames.
        ByteBuf early = pending;
        pending = null;
        return early == null ? Unpooled.EMPTY_BUFFER : early;
    }

    @Override
    public InetSocketAddress serverAddress() {
        return connection.local();
    }

    // ---- reading ----

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf in)) {
            ReferenceCountUtil.release(msg);
            return;
        }
        connection.touched();
        if (!switched) {
            if (answered) in.release();
            else pending = pending == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), pending, in);
            return;
        }
        ByteBuf bytes = pending == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), pending, in);
        pending = null;
        try {
            readFrames(ctx, bytes);
        } finally {
            if (bytes.isReadable() && channel.isActive()) {
                pending = bytes;
            } else {
                bytes.release();
            }
        }
    }

    /**
     * DATA payloads go on as they arrive, without waiting for a whole frame; unknown and reserved frame
     * types are skipped (RFC 9114 9). A HEADERS after the CONNECT's makes the message malformed: trailers
     * have no meaning in a WebSocket's stream (RFC 9220 3 allows only DATA), and frames that belong on
     * the control stream are an error of the connection, as the codec treats them on any request stream.
     */
    private void readFrames(ChannelHandlerContext ctx, ByteBuf bytes) {
        while (bytes.isReadable() && channel.isActive()) {
            if (frameLeft > 0) {
                int take = (int) Math.min(frameLeft, bytes.readableBytes());
                frameLeft -= take;
                if (skipping) bytes.skipBytes(take);
                else ctx.fireChannelRead(bytes.readRetainedSlice(take));
                continue;
            }
            int start = bytes.readerIndex();
            if (!Varint.readable(bytes)) return;
            long type = Varint.read(bytes);
            if (!Varint.readable(bytes)) {
                bytes.readerIndex(start);
                return;
            }
            long length = Varint.read(bytes);
            if (type == HEADERS) {
                LOG.debugf("HTTP/3 WebSocket stream from %s: a HEADERS frame after the CONNECT's", connection.peer());
                channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
                ctx.close();
                return;
            }
            if (type != DATA && controlOnly(type)) {
                LOG.debugf("HTTP/3 WebSocket stream from %s: frame type 0x%x on a request stream", connection.peer(), type);
                connection.closeWith(Http3ErrorCode.H3_FRAME_UNEXPECTED);
                return;
            }
            frameLeft = length;
            skipping = type != DATA;
        }
    }

    /** CANCEL_PUSH, SETTINGS, PUSH_PROMISE, GOAWAY, MAX_PUSH_ID, and HTTP/2's types that HTTP/3 reserves (RFC 9114 7.2.8). */
    private static boolean controlOnly(long type) {
        return type == 0x02 || type == 0x03 || type == 0x04 || type == 0x05 || type == 0x06 || type == 0x07 || type == 0x08
                || type == 0x09 || type == 0x0d;
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        if (switched) {
            ctx.fireChannelReadComplete();
        } else if (!answered && (pending == null || pending.readableBytes() < EARLY_BYTES)) {
            // Read on while the application decides, so that a reset or the client's end is seen.
            ctx.read();
        }
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof ChannelInputShutdownEvent && !answered) {
            // A WebSocket's CONNECT may not end its stream: the client can send no frame after it (RFC 9220
            // 3, RFC 8441 4). A 400, as over HTTP/2; an application already told hears of it as a disconnect.
            refuse(Refusal.of(400, "a WebSocket's CONNECT cannot end its stream"));
        } else if (evt instanceof ChannelInputShutdownEvent) {
            // The client ended its side: after a close handshake that is the end; before it, the WebSocket is
            // lost. Closed once what is queued is written (a close frame's echo), and not within this event:
            // Netty closes a stream that has sent its FIN when this report returns.
            ctx.executor().execute(() -> {
                if (channel.isActive()) channel.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
            });
        }
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (!switched) {
            // A reset before the answer (QUIC reports it as a read's failure): the stream is gone.
            LOG.debugf("HTTP/3 WebSocket stream from %s: %s", connection.peer(), cause.toString());
            ctx.close();
            return;
        }
        ctx.fireExceptionCaught(cause);
    }

    // ---- writing ----

    @Override
    public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
        if (switched && msg instanceof ByteBuf data && data.isReadable()) {
            ctx.write(ConnectAnswers.dataHeader(ctx.alloc(), data.readableBytes()));
        }
        ctx.write(msg, promise);
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (pending != null) {
            pending.release();
            pending = null;
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        handlerRemoved(ctx);
        ctx.fireChannelInactive();
    }
}
