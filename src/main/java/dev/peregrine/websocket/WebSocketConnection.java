package dev.peregrine.websocket;

import dev.peregrine.config.WebSocketSettings;
import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import dev.peregrine.http.WriteQueue;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.TooLongFrameException;
import io.netty.handler.codec.compression.DecompressionException;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CloseWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CorruptedWebSocketFrameException;
import io.netty.handler.codec.http.websocketx.PingWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PongWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.Utf8FrameValidator;
import io.netty.handler.codec.http.websocketx.WebSocket13FrameDecoder;
import io.netty.handler.codec.http.websocketx.WebSocket13FrameEncoder;
import io.netty.handler.codec.http.websocketx.WebSocketDecoderConfig;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrameAggregator;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketServerExtension;
import io.netty.util.concurrent.ScheduledFuture;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One WebSocket connection, from the upgrade request to the close. Over HTTP/1.1, before the
 * application accepts, the HTTP/1.1 handler still owns the channel; on accept the 101 is written and
 * the handler leaves. Over HTTP/2 (RFC 8441) the channel is the CONNECT stream's own, and the accept is
 * a 200. Either way, the accept adds Netty's frame codec, permessage-deflate (when agreed), UTF-8
 * validation and reassembly to the pipeline, with this object last. Frames are decoded, checked and
 * reassembled on the I/O thread: the application adapter only ever sees whole messages.
 *
 * <p>The methods the application adapter calls ({@link #accept}, {@link #send}, ...) may run on any
 * thread; they hand the work to the I/O thread. Everything else runs there.
 */
public final class WebSocketConnection extends ChannelInboundHandlerAdapter {
    /** How long the server waits for the peer's close frame after sending its own before dropping the connection. */
    private static final long CLOSE_HANDSHAKE_MILLIS = 5000;
    private static final int NO_STATUS = 1005, ABNORMAL = 1006;

    private final HttpUpgrade http;
    /** The TCP connection over HTTP/1.1; over HTTP/2 a channel of the one stream that carries the WebSocket. */
    private final Channel channel;
    private final HttpRequestHead head;
    /** RFC 8441's handshake (HTTP/2): CONNECT with {@code :protocol websocket}, answered 200, no key. */
    private final boolean extendedConnect;
    private final String httpVersion;
    private final String scheme;
    private final InetSocketAddress client;
    private final WebSocketSettings settings;
    private final Connections connections;
    private final List<String> subprotocols;

    private WebSocketReceiver receiver;
    private ChannelHandlerContext ctx;
    private final WriteQueue out;
    private final AtomicInteger unconsumedMessages = new AtomicInteger();
    private final AtomicLong unconsumedBytes = new AtomicLong();
    private volatile boolean readPaused;
    private volatile boolean gone;
    private boolean answered;
    private boolean open;
    private boolean closeSent;
    private boolean ended;
    private boolean counted;
    private ScheduledFuture<?> pingTimer;
    private ScheduledFuture<?> pongDeadline;

    /** {@code channel}: registered on its event loop, with the HTTP side's handler, if any, still in its pipeline. */
    public WebSocketConnection(HttpUpgrade http, Channel channel, HttpRequestHead head, String httpVersion,
                               String scheme, InetSocketAddress client, WebSocketSettings settings, Connections connections) {
        this.http = http;
        this.channel = channel;
        this.head = head;
        this.extendedConnect = head.method().equals("CONNECT");
        this.httpVersion = httpVersion;
        this.scheme = "https".equals(scheme) ? "wss" : "ws";
        this.client = client;
        this.settings = settings;
        this.connections = connections;
        this.subprotocols = WebSocketHandshake.subprotocols(head);
        this.out = new WriteQueue(channel.eventLoop());
    }

    /**
     * Checks the handshake and hands a valid one to the application; a bad one is answered here
     * (400, or 426 naming the version we speak). On the I/O thread.
     */
    public void begin(WebSocketApplication application) {
        String version = WebSocketHandshake.header(head, "sec-websocket-version");
        if (version == null || !version.trim().equals("13")) {
            answered = true;
            ResponseHead refusal = plain(426);
            refusal.add("sec-websocket-version", "13");
            http.respond(refusal, text("Upgrade Required: this server speaks WebSocket version 13\n"));
            return;
        }
        if (!extendedConnect && (!WebSocketHandshake.validKey(WebSocketHandshake.header(head, "sec-websocket-key")) || !head.method().equals("GET"))) {
            answered = true;
            http.respond(plain(400), text("Bad Request: invalid WebSocket handshake\n"));
            return;
        }
        counted = true;
        connections.requestStarted();
        application.dispatch(this);
    }

    // ---- what the application adapter reads ----

    public HttpRequestHead head() { return head; }
    public String httpVersion() { return httpVersion; }
    /** "ws" or "wss". */
    public String scheme() { return scheme; }
    public InetSocketAddress remoteAddress() { return client; }
    public InetSocketAddress localAddress() {
        InetSocketAddress server = http.serverAddress();
        if (server != null) return server;
        return channel.localAddress() instanceof InetSocketAddress inet ? inet : null;
    }
    public List<String> subprotocols() { return subprotocols; }
    /** True once the connection is gone. Any thread. */
    public boolean disconnected() { return gone; }

    /** Registers who hears about messages and the close; on the I/O thread, during dispatch. */
    public void start(WebSocketReceiver receiver) {
        this.receiver = receiver;
        if (gone) end(ABNORMAL, "");
    }

    // ---- what the application adapter does; any thread ----

    /** Completes the handshake with a 101; {@code extraHeaders} holds the application's headers (status ignored). */
    public void accept(String subprotocol, ResponseHead extraHeaders, WakeupBatch batch) {
        out.run(() -> acceptOnLoop(subprotocol, extraHeaders), batch);
    }

    /** Refuses the handshake with an HTTP response (the denial response extension, or 403/500 from the adapter). */
    public void deny(ResponseHead response, ByteBuf body, WakeupBatch batch) {
        out.run(() -> {
            if (gone || answered) {
                if (body != null) body.release();
                return;
            }
            answered = true;
            http.respond(response, body);
        }, batch);
    }

    /** Sends one message; takes ownership of {@code data}. */
    public void send(ByteBuf data, boolean text, WakeupBatch batch) {
        int size = data.readableBytes();
        out.queued(size);
        out.run(() -> {
            out.written(size);
            if (gone || closeSent || !open) {
                data.release();
                return;
            }
            ctx.writeAndFlush(text ? new TextWebSocketFrame(data) : new BinaryWebSocketFrame(data));
        }, size, batch);
    }

    /** Starts the closing handshake with the application's code and reason; the peer's answer ends the connection. */
    public void close(int code, String reason, WakeupBatch batch) {
        out.run(() -> {
            if (gone || !open) return;
            sendClose(code, reason, true);
        }, batch);
    }

    /**
     * The application ended without closing (1000) or by failing (1011): close, waiting for the peer's
     * answer as after any close (a client that sees the TCP connection end before it could answer may
     * report an abnormal closure). Before the handshake was answered, the connection is dropped.
     */
    public void finish(int code, WakeupBatch batch) {
        out.run(() -> {
            if (gone) return;
            if (!open) {
                channel.close();
                return;
            }
            sendClose(code, "", true);
        }, batch);
    }

    /** The application received a message of {@code bytes}: reading resumes if it was paused for the queue. Any thread. */
    public void consumed(int bytes) {
        unconsumedMessages.decrementAndGet();
        unconsumedBytes.addAndGet(-bytes);
        if (readPaused && roomInQueue()) channel.eventLoop().execute(this::resumeReading);
    }

    /** False while outgoing data is over its high-water mark. Any thread. */
    public boolean writable() {
        return out.fewQueued() && channel.isWritable();
    }

    /** Runs {@code task} on the I/O thread once the connection is writable again (or gone). Any thread. */
    public void whenWritable(Runnable task) {
        out.whenWritable(task, () -> gone || channel.isWritable());
    }

    // ---- called by the HTTP/1.1 handler before the switch ----

    /** The connection closed before the application accepted. */
    public void httpClosed() {
        lost();
    }

    // ---- I/O thread ----

    private void acceptOnLoop(String subprotocol, ResponseHead extraHeaders) {
        if (gone || answered) return;
        answered = true;
        ResponseHead response;
        if (extendedConnect) {
            response = new ResponseHead(200);
        } else {
            response = new ResponseHead(101);
            response.add("upgrade", "websocket");
            response.add("connection", "Upgrade");
            response.add("sec-websocket-accept", WebSocketHandshake.acceptKey(WebSocketHandshake.header(head, "sec-websocket-key")));
        }
        if (subprotocol != null) response.add("sec-websocket-protocol", subprotocol);
        WebSocketServerExtension deflate = settings.compress() ? WebSocketHandshake.negotiateDeflate(head, settings.maxMessage()) : null;
        if (deflate != null) response.add("sec-websocket-extensions", WebSocketHandshake.extensionHeader(deflate));
        if (extraHeaders != null) response.addAll(extraHeaders);

        ChannelPipeline pipeline = channel.pipeline();
        addFrameCodec(pipeline, settings.maxMessage(), deflate);
        pipeline.addLast("ws", this);
        ByteBuf early = http.switchProtocols(response);
        open = true;
        // channelInactive may not get this far: a decoder that fails again while closing (the inflater
        // after corrupt data) raises instead of passing it on. The close future always completes; its
        // listener can run inside the write that closes, so lost() is deferred to let the code being
        // handled there (a protocol error's, say) reach the application rather than 1006.
        ctx.channel().closeFuture().addListener(closed -> ctx.executor().execute(this::lost));
        if (settings.pingIntervalMillis() > 0) {
            pingTimer = ctx.executor().scheduleAtFixedRate(this::ping, settings.pingIntervalMillis(), settings.pingIntervalMillis(),
                    TimeUnit.MILLISECONDS);
        }
        if (early.isReadable()) {
            pipeline.fireChannelRead(early);
            pipeline.fireChannelReadComplete();
        } else {
            early.release();
            ctx.read();
        }
        if (connections.draining() && open && !closeSent) drainClose();
    }

    @Override
    public void handlerAdded(ChannelHandlerContext ctx) {
        this.ctx = ctx;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof WebSocketFrame frame)) {
            ctx.fireChannelRead(msg);
            return;
        }
        if (ended && !(frame instanceof CloseWebSocketFrame)) {
            frame.release();
            return;
        }
        switch (frame) {
            case TextWebSocketFrame text -> deliver(text.content(), true);
            case BinaryWebSocketFrame binary -> deliver(binary.content(), false);
            case PingWebSocketFrame ping -> {
                if (closeSent) ping.release();
                else ctx.write(new PongWebSocketFrame(ping.content()));
            }
            case PongWebSocketFrame pong -> {
                pong.release();
                if (pongDeadline != null) {
                    pongDeadline.cancel(false);
                    pongDeadline = null;
                }
            }
            case CloseWebSocketFrame close -> peerClosed(close);
            default -> frame.release();
        }
    }

    private void deliver(ByteBuf data, boolean text) {
        unconsumedMessages.incrementAndGet();
        unconsumedBytes.addAndGet(data.readableBytes());
        if (!roomInQueue()) {
            readPaused = true;
            // The adapter may have consumed between the check and the flag; it only resumes when it sees the flag.
            if (roomInQueue()) readPaused = false;
        }
        receiver.onMessage(data, text);
    }

    private boolean roomInQueue() {
        return unconsumedMessages.get() < settings.maxQueue() && unconsumedBytes.get() < settings.maxQueueBytes();
    }

    private void resumeReading() {
        if (readPaused && roomInQueue() && !gone) {
            readPaused = false;
            ctx.read();
        }
    }

    private void peerClosed(CloseWebSocketFrame close) {
        int code = close.statusCode();
        String reason = code < 0 ? "" : close.reasonText();
        close.release();
        // The application hears the peer's code before anything here can close the channel (which would report 1006).
        end(code < 0 ? NO_STATUS : code, reason);
        if (!closeSent) {
            closeSent = true;
            // Echo the peer's code, as RFC 6455 5.5.1 suggests; then the TCP connection is ours to close.
            CloseWebSocketFrame echo = code < 0 ? new CloseWebSocketFrame() : new CloseWebSocketFrame(code, "");
            ctx.writeAndFlush(echo).addListener(ChannelFutureListener.CLOSE);
        } else {
            ctx.close();
        }
    }

    /** Sends our close frame; the connection ends when the peer answers, or after a grace period. */
    private void sendClose(int code, String reason, boolean waitForPeer) {
        if (closeSent) return;
        closeSent = true;
        stopPings();
        var written = ctx.writeAndFlush(new CloseWebSocketFrame(code, reason));
        if (waitForPeer) {
            ctx.executor().schedule(() -> ctx.close(), CLOSE_HANDSHAKE_MILLIS, TimeUnit.MILLISECONDS);
            // The peer's close frame must be read even if the application stopped receiving.
            readPaused = false;
            ctx.read();
        } else {
            written.addListener(ChannelFutureListener.CLOSE);
        }
    }

    private void drainClose() {
        end(1001, "server shutting down");
        sendClose(1001, "server shutting down", true);
    }

    private void ping() {
        if (gone || closeSent || pongDeadline != null) return;
        ctx.writeAndFlush(new PingWebSocketFrame(Unpooled.EMPTY_BUFFER));
        if (settings.pingTimeoutMillis() > 0) {
            pongDeadline = ctx.executor().schedule(this::pingTimedOut, settings.pingTimeoutMillis(), TimeUnit.MILLISECONDS);
        }
    }

    /** A peer that does not answer a ping in time is taken for dead: close 1011 and drop the connection. */
    private void pingTimedOut() {
        pongDeadline = null;
        // While reading is paused for a slow application the pong may be sitting unread behind the
        // peer's messages: the peer is not judged then, and the next interval pings again.
        if (gone || readPaused) return;
        end(1011, "keepalive ping timeout");
        sendClose(1011, "keepalive ping timeout", false);
    }

    private void stopPings() {
        if (pingTimer != null) pingTimer.cancel(false);
        if (pongDeadline != null) pongDeadline.cancel(false);
        pingTimer = null;
        pongDeadline = null;
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.flush();
        if (!readPaused && !gone) ctx.read();
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        if (evt == Connections.DrainEvent.INSTANCE) {
            if (open && !closeSent) drainClose();
            return;
        }
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (ctx.channel().isWritable()) out.runWritableTasks();
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof CorruptedWebSocketFrameException corrupted) {
            // Netty's decoder or UTF-8 validator already sent the close frame and closes the connection.
            closeSent = true;
            end(corrupted.closeStatus().code(), corrupted.closeStatus().reasonText());
        } else if (cause instanceof TooLongFrameException) {
            end(1009, "message too big");
            sendClose(1009, "message too big", false);
        } else if (decompressionFailure(cause) instanceof DecompressionException failure) {
            // The inflater stops at --ws-max-message (its maxAllocation) with this same exception type.
            boolean tooBig = failure.getMessage() != null && failure.getMessage().contains("maximum size");
            int code = tooBig ? 1009 : 1007;
            String reason = tooBig ? "message too big" : "invalid compressed data";
            end(code, reason);
            sendClose(code, reason, false);
        } else {
            ctx.close();
        }
    }

    /**
     * The frame handlers of an accepted WebSocket, in order: Netty's codec, the inflater when
     * permessage-deflate was agreed, UTF-8 checks, and reassembly bounded by --ws-max-message.
     * Shared with the fuzz test, which must exercise exactly this chain.
     */
    static void addFrameCodec(ChannelPipeline pipeline, int maxMessage, WebSocketServerExtension deflate) {
        WebSocketDecoderConfig config = WebSocketDecoderConfig.newBuilder()
                .maxFramePayloadLength(maxMessage)
                .expectMaskedFrames(true)
                .allowMaskMismatch(false)
                .allowExtensions(deflate != null)
                .closeOnProtocolViolation(true)
                .withUTF8Validator(false) // added below, after the inflater: compressed text is only checkable once inflated
                .build();
        // The encoder sits before the decoder so that the close frames the decoder sends on a protocol error are encoded.
        pipeline.addLast("ws-encoder", new WebSocket13FrameEncoder(false));
        pipeline.addLast("ws-decoder", new WebSocket13FrameDecoder(config));
        if (deflate != null) {
            pipeline.addLast("ws-deflate-encoder", deflate.newExtensionEncoder());
            pipeline.addLast("ws-deflate-decoder", deflate.newExtensionDecoder());
        }
        pipeline.addLast("ws-utf8", new Utf8FrameValidator(true));
        pipeline.addLast("ws-aggregator", new WebSocketFrameAggregator(maxMessage));
    }

    private static Throwable decompressionFailure(Throwable cause) {
        for (Throwable t = cause; t != null; t = t.getCause()) {
            if (t instanceof DecompressionException) return t;
        }
        return null;
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        lost();
        ctx.fireChannelInactive();
    }

    private void lost() {
        gone = true;
        stopPings();
        end(ABNORMAL, "");
        out.runWritableTasks();
    }

    /** Tells the application the connection is over, once; and stops counting it as in flight. */
    private void end(int code, String reason) {
        if (receiver == null) return; // told in start()
        if (!ended) {
            ended = true;
            receiver.onClose(code, reason);
        }
        if (counted && gone) {
            counted = false;
            connections.requestEnded();
        }
    }

    private static ResponseHead plain(int status) {
        ResponseHead head = new ResponseHead(status);
        head.add("content-type", "text/plain; charset=utf-8");
        return head;
    }

    private static ByteBuf text(String body) {
        return Unpooled.copiedBuffer(body, StandardCharsets.UTF_8);
    }
}
