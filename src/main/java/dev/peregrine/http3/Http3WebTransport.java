package dev.peregrine.http3;

import dev.peregrine.http.FieldListRequests;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.Refusal;
import dev.peregrine.http.RequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.http.WriteQueue;
import dev.peregrine.webtransport.Capsules;
import dev.peregrine.webtransport.StreamErrors;
import dev.peregrine.webtransport.Varint;
import dev.peregrine.webtransport.WebTransportReceiver;
import dev.peregrine.webtransport.WebTransportSession;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.incubator.codec.http3.DefaultHttp3Headers;
import io.netty.incubator.codec.http3.Http3ErrorCode;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicStreamType;
import io.netty.util.ReferenceCountUtil;
import org.jboss.logging.Logger;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

/**
 * One WebTransport session (draft-ietf-webtrans-http3-02, as Chromium speaks it) on the CONNECT stream
 * that opened it: the answer to the CONNECT, the capsules that stream carries afterwards, the session's
 * streams and datagrams, and its end. The HTTP/3 codec has left this stream ({@link ExtendedConnect}),
 * so its frames are read and written here.
 *
 * <p>The methods of {@link WebTransportSession} may run on any thread and hand their work to the I/O
 * thread; everything else runs there.
 */
final class Http3WebTransport extends ChannelInboundHandlerAdapter implements WebTransportSession {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final long DATA_FRAME = 0x00;
    /** Stream data the application has not received yet past which the session's streams are no longer read. */
    static final long SESSION_BUFFER = 256 * 1024;
    /** Datagrams the application has not received yet past which new ones are dropped (and counted). */
    static final int MAX_QUEUED_DATAGRAMS = 64;
    /** Streams a session may have open at once; more are refused with a reset. */
    static final int MAX_STREAMS = 100;
    /** WEBTRANSPORT_SESSION_GONE: the stream's session is over (draft-ietf-webtrans-http3-02 4.5). */
    static final long SESSION_GONE = 0x170d7b68L;
    /** WEBTRANSPORT_BUFFERED_STREAM_REJECTED: a stream for a session that is not (or no longer) there. */
    static final long STREAM_REJECTED = 0x3994bd84L;

    private final Http3Connection connection;
    private final DefaultHttp3Headers fields;
    private final String protocol;
    private ChannelHandlerContext ctx;
    private QuicStreamChannel channel;
    private RequestHead head;
    /** The client, as a trusted proxy may have named it; set once the CONNECT reaches the rate limit. */
    private InetSocketAddress client;
    private WriteQueue out;
    private WebTransportReceiver receiver;
    /** The CONNECT stream's bytes not yet read as frames, and the DATA payload not yet read as capsules. */
    private ByteBuf frames, capsules;
    private final Map<Long, WebTransportStream> streams = new ConcurrentHashMap<>();
    private final ArrayList<WebTransportStream> paused = new ArrayList<>();
    private final AtomicLong unconsumed = new AtomicLong();
    private final AtomicInteger queuedDatagrams = new AtomicInteger();
    private long droppedDatagrams;
    private long startNanos;
    private boolean answered;
    private volatile boolean accepted;
    private volatile boolean closed;
    private boolean counted;

    Http3WebTransport(Http3Connection connection, DefaultHttp3Headers fields, CharSequence protocol) {
        this.connection = connection;
        this.fields = fields;
        this.protocol = protocol.toString();
    }

    long id() {
        return channel.streamId();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        this.channel = (QuicStreamChannel) ctx.channel();
        this.out = new WriteQueue(ctx.executor());
        this.startNanos = System.nanoTime();
        channel.config().setAutoRead(false);
        begin();
    }

    private void begin() {
        if (!connection.sessionOpened(this)) {
            answered = true;
            closed = true;
            channel.shutdown(Http3ErrorCode.H3_REQUEST_REJECTED.code());
            return;
        }
        try {
            head = connection.requestHead(fields);
        } catch (FieldListRequests.Malformed e) {
            answered = true;
            channel.shutdown(Http3ErrorCode.H3_MESSAGE_ERROR.code());
            end(0, "");
            return;
        }
        if (!"webtransport".equals(protocol) || !connection.takesWebTransport()) {
            // Another protocol over extended CONNECT, or an application that cannot take sessions (WSGI).
            answer(501);
            return;
        }
        // Past here the CONNECT is a handshake, as a WebSocket's: the rate limit applies, and its answer is logged.
        connection.decideUpgrade(head, ctx.executor(), (origin, refusal) -> {
            if (closed || answered) return; // ended while the answer came back from the shared store
            client = origin.client();
            if (refusal != null) {
                answer(refusal.head(), Unpooled.wrappedBuffer(refusal.body()));
                return;
            }
            counted = true;
            connection.countSession();
            connection.startSession(this);
            ctx.read();
        });
    }

    /** Answers the CONNECT with a status that refuses it, and ends the stream. */
    private void answer(int status) {
        answer(new ResponseHead(status), null);
    }

    private void answer(ResponseHead response, ByteBuf body) {
        answered = true;
        int size = body == null ? 0 : body.readableBytes();
        ConnectAnswers.write(ctx, connection, response, body).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        answerRecorded(response.status(), size);
        end(0, "");
    }

    /**
     * In the metrics, and in the access log once the CONNECT is a handshake (it reached the rate limit):
     * as a WebSocket's, the only record of a session is its answer, since no exchange records it.
     */
    private void answerRecorded(int status, long bytes) {
        if (client == null) connection.refused(head, status, startNanos, bytes);
        else connection.upgradeAnswered(head, client, status, bytes, startNanos);
    }

    // ---- WebTransportSession: what the adapter reads ----

    @Override public HttpRequestHead head() { return head; }
    @Override public String httpVersion() { return "3"; }
    @Override public String scheme() { return "https"; }
    @Override public InetSocketAddress remoteAddress() { return client != null ? client : connection.peer(); }
    @Override public InetSocketAddress localAddress() { return connection.local(); }
    @Override public boolean closed() { return closed; }

    @Override
    public void start(WebTransportReceiver receiver) {
        this.receiver = receiver;
    }

    // ---- WebTransportSession: what the adapter does, any thread ----

    @Override
    public void accept(ResponseHead extraHeaders, WakeupBatch batch) {
        out.run(() -> {
            if (closed || answered) return;
            answered = true;
            accepted = true;
            // Chromium's draft-02 client looks for this header in the answer.
            ctx.writeAndFlush(QpackLiterals.headersFrame(ctx.alloc(), 200,
                    new String[] {"sec-webtransport-http3-draft", "draft02"}, extraHeaders));
            answerRecorded(200, 0);
        }, batch);
    }

    @Override
    public void refuse(int status, WakeupBatch batch) {
        out.run(() -> {
            if (closed || answered) return;
            answer(status);
        }, batch);
    }

    @Override
    public void send(long stream, ByteBuf data, boolean end, WakeupBatch batch) {
        WebTransportStream target = streams.get(stream);
        if (target != null && end) target.outputEnding = true;
        int size = data.readableBytes();
        out.queued(size);
        out.run(() -> {
            out.written(size);
            if (closed || target == null || !target.channel().isActive()) {
                data.release();
                return;
            }
            target.write(data, end); // dropped when the client stopped the stream
        }, batch);
    }

    @Override
    public void resetStream(long stream, long code, WakeupBatch batch) {
        WebTransportStream target = streams.get(stream);
        if (target != null) target.outputEnding = true;
        out.run(() -> {
            if (!closed && target != null && target.channel().isActive()) target.reset(StreamErrors.toHttp3(code));
        }, batch);
    }

    @Override
    public void stopStream(long stream, long code, WakeupBatch batch) {
        WebTransportStream target = streams.get(stream);
        out.run(() -> {
            if (!closed && target != null && target.channel().isActive()) target.stopSending(StreamErrors.toHttp3(code));
        }, batch);
    }

    @Override
    public void openStream(boolean bidirectional, LongConsumer opened, WakeupBatch batch) {
        out.run(() -> {
            if (closed || !accepted || streams.size() >= MAX_STREAMS) {
                opened.accept(-1);
                return;
            }
            WebTransportStream stream = new WebTransportStream(connection, this, bidirectional);
            connection.quic().createStream(bidirectional ? QuicStreamType.BIDIRECTIONAL : QuicStreamType.UNIDIRECTIONAL, stream)
                    .addListener(future -> {
                        if (!future.isSuccess() || closed) {
                            if (future.isSuccess()) ((QuicStreamChannel) future.getNow()).close();
                            opened.accept(-1);
                            return;
                        }
                        QuicStreamChannel created = (QuicStreamChannel) future.getNow();
                        streams.put(created.streamId(), stream);
                        ByteBuf header = created.alloc().buffer(16);
                        Varint.write(header, bidirectional ? ExtendedConnect.WEBTRANSPORT_STREAM : WebTransportStream.UNIDIRECTIONAL_TYPE);
                        Varint.write(header, id());
                        created.writeAndFlush(header);
                        opened.accept(created.streamId());
                    });
        }, batch);
    }

    @Override
    public void sendDatagram(ByteBuf data, WakeupBatch batch) {
        out.run(() -> {
            if (closed || !accepted) {
                data.release();
                return;
            }
            ByteBuf prefix = ctx.alloc().buffer(8);
            Varint.write(prefix, channel.streamId() / 4); // the quarter stream ID (RFC 9297 2.1)
            connection.sendDatagram(Unpooled.wrappedBuffer(prefix, data));
        }, batch);
    }

    @Override
    public void close(long code, String reason, WakeupBatch batch) {
        out.run(() -> closeSession(code, reason), batch);
    }

    @Override
    public void finish(boolean failed, WakeupBatch batch) {
        out.run(() -> {
            if (closed) return;
            if (!answered) {
                answer(500);
                return;
            }
            closeSession(failed ? 1 : 0, "");
        }, batch);
    }

    @Override
    public boolean sendable(long stream) {
        WebTransportStream target = streams.get(stream);
        return target != null && target.writable && !target.outputEnding;
    }

    @Override
    public boolean receivable(long stream) {
        // By the ID's shape, so that a stream already gone still counts (RFC 9000 2.1).
        boolean clientOpened = (stream & 1) == 0, bidirectional = (stream & 2) == 0;
        return clientOpened || bidirectional;
    }

    @Override
    public void consumed(int bytes) {
        long now = unconsumed.addAndGet(-bytes);
        if (now < SESSION_BUFFER && now + bytes >= SESSION_BUFFER) ctx.executor().execute(this::resumeReading);
    }

    @Override
    public void datagramConsumed() {
        queuedDatagrams.decrementAndGet();
    }

    @Override
    public boolean writable(long stream) {
        WebTransportStream target = streams.get(stream);
        return out.fewQueued() && (target == null || target.takesMore());
    }

    @Override
    public void whenWritable(long stream, Runnable task) {
        // Only the stream is asked: what is queued for it is handed over by tasks that may still be in the
        // Python thread's batch, and the stream's buffer fills (and drains) once those have run.
        ctx.executor().execute(() -> {
            WebTransportStream target = streams.get(stream);
            if (closed || target == null) task.run();
            else target.whenWritable(task);
        });
    }

    // ---- the session's streams and datagrams; I/O thread ----

    /** A stream that names this session: false when it cannot have it (not accepted, over, or too many streams). */
    boolean adopt(WebTransportStream stream) {
        if (!accepted || closed || streams.size() >= MAX_STREAMS) return false;
        streams.put(stream.channel().streamId(), stream);
        return true;
    }

    void streamData(WebTransportStream stream, ByteBuf data, boolean end) {
        if (closed || receiver == null) {
            data.release();
            return;
        }
        unconsumed.addAndGet(data.readableBytes());
        receiver.onStreamData(stream.channel().streamId(), data, end);
    }

    void streamReset(WebTransportStream stream, long code) {
        if (!closed && receiver != null) receiver.onStreamReset(stream.channel().streamId(), code);
    }

    void streamGone(WebTransportStream stream) {
        streams.remove(stream.channel().streamId());
        paused.remove(stream);
    }

    /** Whether the session's streams may be read further: the application keeps up. */
    boolean mayRead(WebTransportStream stream) {
        if (unconsumed.get() < SESSION_BUFFER) return true;
        if (!paused.contains(stream)) paused.add(stream);
        return false;
    }

    private void resumeReading() {
        if (unconsumed.get() >= SESSION_BUFFER || paused.isEmpty()) return;
        // Emptied first: a stream's read may deliver at once, and pause it (or another) again.
        WebTransportStream[] resumed = paused.toArray(new WebTransportStream[0]);
        paused.clear();
        for (WebTransportStream stream : resumed) stream.resume();
    }

    void datagram(ByteBuf payload) {
        if (closed || !accepted || receiver == null) {
            payload.release();
            return;
        }
        if (queuedDatagrams.get() >= MAX_QUEUED_DATAGRAMS) {
            droppedDatagrams++;
            connection.datagramDropped();
            payload.release();
            return;
        }
        queuedDatagrams.incrementAndGet();
        receiver.onDatagram(payload);
    }

    // ---- the CONNECT stream ----

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf in)) {
            ReferenceCountUtil.release(msg);
            return;
        }
        connection.touched();
        if (closed) {
            in.release();
            return;
        }
        frames = frames == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), frames, in);
        try {
            readFrames();
        } catch (Capsules.Malformed e) {
            LOG.debugf("WebTransport session from %s: %s", connection.peer(), e.getMessage());
            connection.closeWith(Http3ErrorCode.H3_GENERAL_PROTOCOL_ERROR);
        }
    }

    /** HTTP/3 frames on the CONNECT stream: DATA carries capsules; the rest (trailers, unknown types) is skipped. */
    private void readFrames() throws Capsules.Malformed {
        while (!closed && Varint.readable(frames)) {
            int start = frames.readerIndex();
            long type = Varint.read(frames);
            if (!Varint.readable(frames)) {
                frames.readerIndex(start);
                return;
            }
            long length = Varint.read(frames);
            if (length > Capsules.MAX_CAPSULE) throw new Capsules.Malformed("a frame of " + length + " bytes on a CONNECT stream");
            if (frames.readableBytes() < length) {
                frames.readerIndex(start);
                return;
            }
            ByteBuf payload = frames.readSlice((int) length);
            if (type != DATA_FRAME) continue;
            if (capsules == null) capsules = ctx.alloc().buffer();
            capsules.writeBytes(payload);
            Object capsule;
            while ((capsule = Capsules.next(capsules)) != null) {
                if (capsule instanceof Capsules.Close close) {
                    // The client closed the session: the server's side of the stream ends too.
                    endOutput();
                    end(close.code(), close.reason());
                    return;
                }
            }
            capsules.discardReadBytes();
            if (capsules.readableBytes() > Capsules.MAX_CAPSULE) throw new Capsules.Malformed("an unfinished capsule past its limit");
        }
        frames.discardSomeReadBytes();
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        // The CONNECT stream carries little: it is always read, so that its end is seen at once.
        if (!closed) ctx.read();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt instanceof ChannelInputShutdownEvent && !closed) {
            // A FIN without a close capsule closes the session with code 0 (draft-ietf-webtrans-http3-02 5).
            endOutput();
            end(0, "");
        }
        ctx.fireUserEventTriggered(evt);
    }

    /**
     * Ends the server's side of the CONNECT stream (FIN), in a task of its own: when the client's end of
     * input is being reported, Netty's QUIC closes a stream whose output is shut down as soon as that
     * report returns, and the FIN, not yet sent, was then lost (found by Http3FuzzTest: the client waited
     * for it forever).
     */
    private void endOutput() {
        ctx.executor().execute(() -> {
            if (channel.isActive() && !channel.isOutputShutdown()) channel.shutdownOutput();
        });
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        end(0, "");
        release();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        LOG.debugf("WebTransport session from %s: %s", connection.peer(), cause.toString());
        if (channel.isActive()) channel.shutdown(Http3ErrorCode.H3_INTERNAL_ERROR.code());
        end(0, "");
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        release();
    }

    private void release() {
        if (frames != null) {
            frames.release();
            frames = null;
        }
        if (capsules != null) {
            capsules.release();
            capsules = null;
        }
    }

    /** The connection drains: the session is closed with its capsule, so that the client reconnects elsewhere. */
    void drain() {
        if (!answered) answer(503);
        else closeSession(0, "the server is shutting down");
    }

    void connectionClosed() {
        end(0, "");
    }

    private void closeSession(long code, String reason) {
        if (closed) return;
        if (!answered) {
            answer(500);
            return;
        }
        ByteBuf capsule = Capsules.close(ctx.alloc(), code, reason);
        ByteBuf frame = ctx.alloc().buffer(16 + capsule.readableBytes());
        Varint.write(frame, DATA_FRAME);
        Varint.write(frame, capsule.readableBytes());
        frame.writeBytes(capsule);
        capsule.release();
        ctx.writeAndFlush(frame).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
        end(code, reason);
    }

    /** The session is over, however it ended: its streams are reset, the application told once. */
    private void end(long code, String reason) {
        if (closed) return;
        closed = true;
        for (WebTransportStream stream : new ArrayList<>(streams.values())) stream.sessionGone();
        streams.clear();
        paused.clear();
        if (droppedDatagrams > 0) {
            LOG.debugf("WebTransport session from %s dropped %d datagrams the application did not read in time", connection.peer(),
                    droppedDatagrams);
        }
        if (receiver != null) receiver.onClose(code, reason);
        if (counted) {
            counted = false;
            connection.uncountSession();
        }
        connection.sessionEnded(this);
    }

    long droppedDatagrams() {
        return droppedDatagrams;
    }
}
