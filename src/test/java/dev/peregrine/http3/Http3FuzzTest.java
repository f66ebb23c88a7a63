package dev.peregrine.http3;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.testing.AnsweringApplication;
import dev.peregrine.testing.EchoingWebSockets;
import dev.peregrine.testing.FuzzPieces;
import dev.peregrine.webtransport.WebTransportApplication;
import dev.peregrine.webtransport.WebTransportReceiver;
import dev.peregrine.webtransport.WebTransportSession;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.netty.incubator.codec.http3.Http3;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicSslContext;
import io.netty.incubator.codec.quic.QuicSslContextBuilder;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicStreamType;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigInteger;
import java.net.DatagramPacket;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Date;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * Fuzzes what an HTTP/3 client talks to, over real QUIC on the loopback: Netty's HTTP/3 frame decoder
 * and QPACK decoder as the server sets them up ({@link Http3Setup#quicCodec}), on a request stream and
 * on the client's unidirectional streams (control, QPACK encoder and decoder, unknown types), then
 * {@link Http3Connection} and {@link Http3Stream}, in front of an application that reads every body and
 * answers every request. The client is Netty's QUIC without its HTTP/3 codec: the fuzzed bytes go onto
 * the stream as they are, in pieces, then the FIN. After each input: a request stream was ended by the
 * server (a response that begins with HEADERS, a reset, or the connection's close), never left open;
 * nothing escaped a pipeline or was complained about (a warning or error logged by Netty or the
 * server); the server still answers a well-formed GET with 200 on a new stream (on the same connection
 * when the input was a request stream and the connection is still open, else on a new one); and every
 * request the application saw has ended: none left in flight. The connection is reused from input to
 * input while it lasts, and a new one is made when the input needs its own control or QPACK stream.
 *
 * <p>A flag of {@link #streams} makes the request stream a WebSocket's (RFC 9220, an extended CONNECT
 * with {@code :protocol websocket} that {@link ExtendedConnect} hands to {@link Http3WebSocket}), served by
 * an application that echoes; the fuzzed bytes follow the CONNECT, raw or each piece in a DATA frame.
 * The same holds afterwards: the stream ended or reset, the WebSocket no longer in flight.
 *
 * <p>{@link #webTransport} opens a WebTransport session (an extended CONNECT, which {@link ExtendedConnect}
 * takes away from Netty's codec) with an application that accepts every session, and fuzzes what
 * follows: the CONNECT stream's frames and capsules, or a WebTransport stream of the session, either
 * kind. Afterwards the session's CONNECT stream has been ended or reset, the session is no longer in
 * flight, nothing was logged, and the server still answers a GET.
 *
 * <p>{@link #datagrams} sends fuzzed UDP datagrams to the server's socket (QUIC's packet parsing is
 * quiche's native code; the Java side around it, connection ids and address-validation tokens, is
 * Netty's) and then a new client must be served.
 */
class Http3FuzzTest {
    /**
     * How long the harness waits for what must come (a response, a reset, the connection's close, the end
     * of the requests in flight). Only a failing input waits that long; it is generous for the first
     * inputs of a fuzzing run, when the instrumentation of each newly loaded class slows everything, and
     * for a loaded 2-core machine: 5 s gave two findings there that did not reproduce alone.
     */
    private static final long WAIT_MILLIS = 15_000;

    /**
     * What the fuzzer puts on a stream: body and frames after a valid HEADERS (the empty input is a plain
     * GET), a request stream of its own, or a client unidirectional stream of a given type.
     */
    private static final int REQUEST_AFTER_HEADERS = 0, REQUEST = 1, CONTROL = 2, QPACK_ENCODER = 3, QPACK_DECODER = 4, OTHER_UNI = 5;

    @FuzzTest(maxDuration = "30s")
    void streams(FuzzedDataProvider data) throws Exception {
        int kind = data.consumeInt(REQUEST_AFTER_HEADERS, OTHER_UNI);
        int flags = data.consumeByte() & 0xff;
        int pieces = data.consumeInt(1, 8);
        long uniType = switch (kind) {
            case CONTROL -> 0x00;
            case QPACK_ENCODER -> 0x02;
            case QPACK_DECODER -> 0x03;
            case OTHER_UNI -> data.consumeLong(0, (1L << 62) - 1);
            default -> -1;
        };
        byte[] input = data.consumeRemainingAsBytes();
        Rig rig = Rig.get();
        rig.problems.clear();
        try {
            feed(rig, kind, flags, pieces, uniType, input);
        } catch (Throwable failure) {
            rig.dropClient(); // the next input starts on a new connection, whatever this one left behind
            throw failure;
        }
    }

    private static void feed(Rig rig, int kind, int flags, int pieces, long uniType, byte[] input) throws Exception {
        boolean request = kind == REQUEST || kind == REQUEST_AFTER_HEADERS;
        Client client = rig.clientFor(request ? -1 : uniType);
        QuicStreamChannel stream;
        Collector collector = new Collector();
        ByteBuf first = null;
        // After HEADERS, a flag makes them a WebSocket's extended CONNECT (RFC 9220), which the application
        // accepts, and another puts each piece in a DATA frame, so that the fuzzer reaches the WebSocket frames at once.
        boolean webSocket = kind == REQUEST_AFTER_HEADERS && (flags & 8) != 0;
        boolean inData = webSocket && (flags & 16) != 0;
        if (request) {
            stream = client.newStream(QuicStreamType.BIDIRECTIONAL, collector);
            if (webSocket) first = extendedConnectFrame("websocket");
            else if (kind == REQUEST_AFTER_HEADERS) first = headersFrame((flags & 1) != 0 ? "POST" : "GET");
        } else {
            stream = client.newStream(QuicStreamType.UNIDIRECTIONAL, Drain.INSTANCE);
            first = Unpooled.buffer();
            writeVarint(first, uniType);
            // A control stream must begin with SETTINGS; the fuzzer may start past it or not.
            if (kind == CONTROL && (flags & 2) != 0) first.writeBytes(new byte[] {0x04, 0x00});
        }
        if (stream != null) {
            if (first != null) stream.writeAndFlush(first);
            for (byte[] piece : FuzzPieces.split(input, pieces)) {
                if (inData) {
                    ByteBuf header = Unpooled.buffer(9);
                    writeVarint(header, 0x00);
                    writeVarint(header, piece.length);
                    stream.write(header);
                }
                stream.writeAndFlush(Unpooled.wrappedBuffer(piece));
            }
            // Ending a critical stream (control, QPACK) is a connection error; the fuzzer says whether it happens.
            boolean critical = kind == CONTROL || kind == QPACK_ENCODER || kind == QPACK_DECODER;
            if (!critical || (flags & 4) != 0) stream.shutdownOutput();
        } else if (first != null) {
            first.release();
        }

        // A request stream is the server's to end once the client's side is over: with a response (which
        // begins with HEADERS), a reset, or the connection's close. None may be left open, unanswered.
        if (request && stream != null) {
            Response own;
            try {
                own = collector.done.get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                stream.close();
                fail("the server neither answered nor reset a request stream " + WAIT_MILLIS + " ms after the client's FIN"
                        + " (connection " + (client.isActive() ? "still open" : "closed") + ")");
                return;
            }
            if (own.fin() && !own.startsWithHeaders()) fail("the server ended a request stream without a response: " + own);
        }

        // The server still serves: on this connection after a request stream (its connection-wide state
        // is the client's valid control stream's), else on a new one if the input made it unusable.
        Response response = client.isActive() ? client.get() : null;
        if (response == null || !response.ok()) {
            // Unless the input's error is closing the connection (its close may still be on its way).
            if (request && response != null && !client.quic.closeFuture().await(WAIT_MILLIS / 4)) {
                fail("a well-formed GET on a new stream of a connection that is still open was not answered: " + response);
            }
            rig.dropClient();
            Client fresh = rig.clientFor(-1);
            Response again = fresh.get();
            if (again == null || !again.ok()) fail("the server no longer serves a new connection: " + again);
        }
        awaitNoneInFlight(rig);
        rig.assertNoProblems();
    }

    /** What the fuzzer writes in a session: on its CONNECT stream, on a bidirectional or a unidirectional stream of it. */
    private static final int ON_CONNECT_STREAM = 0, ON_BIDIRECTIONAL = 1, ON_UNIDIRECTIONAL = 2;

    @FuzzTest(maxDuration = "30s")
    void webTransport(FuzzedDataProvider data) throws Exception {
        int kind = data.consumeInt(ON_CONNECT_STREAM, ON_UNIDIRECTIONAL);
        int pieces = data.consumeInt(1, 8);
        byte[] input = data.consumeRemainingAsBytes();
        Rig rig = Rig.get();
        rig.problems.clear();
        try {
            session(rig, kind, pieces, input);
        } catch (Throwable failure) {
            rig.dropClient();
            throw failure;
        }
    }

    private static void session(Rig rig, int kind, int pieces, byte[] input) throws Exception {
        // A unidirectional stream needs stream credit of its own: such inputs each get a new connection.
        Client client = rig.clientFor(kind == ON_UNIDIRECTIONAL ? WebTransportStream.UNIDIRECTIONAL_TYPE : -1);
        Collector connect = new Collector();
        QuicStreamChannel connectStream = client.newStream(QuicStreamType.BIDIRECTIONAL, connect);
        if (connectStream == null) fail("no stream for a session on a connection with stream credit");
        connectStream.writeAndFlush(extendedConnectFrame("webtransport"));
        if (kind == ON_CONNECT_STREAM) {
            for (byte[] piece : FuzzPieces.split(input, pieces)) connectStream.writeAndFlush(Unpooled.wrappedBuffer(piece));
        } else {
            connect.started.get(WAIT_MILLIS, TimeUnit.MILLISECONDS); // the session is answered: its streams are taken
            boolean bidirectional = kind == ON_BIDIRECTIONAL;
            Collector echo = new Collector();
            QuicStreamChannel stream = client.newStream(bidirectional ? QuicStreamType.BIDIRECTIONAL : QuicStreamType.UNIDIRECTIONAL,
                    bidirectional ? echo : Drain.INSTANCE);
            if (stream == null) fail("no stream for the session's data");
            ByteBuf header = Unpooled.buffer();
            writeVarint(header, bidirectional ? ExtendedConnect.WEBTRANSPORT_STREAM : WebTransportStream.UNIDIRECTIONAL_TYPE);
            writeVarint(header, connectStream.streamId());
            stream.writeAndFlush(header);
            for (byte[] piece : FuzzPieces.split(input, pieces)) stream.writeAndFlush(Unpooled.wrappedBuffer(piece));
            stream.shutdownOutput();
            // The application ends each stream the client ended: a FIN comes back (or a reset, or the connection's close).
            if (bidirectional) echo.done.get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
        }
        connectStream.shutdownOutput();
        Response own;
        try {
            own = connect.done.get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            String state = "active " + connectStream.isActive() + " in " + connectStream.isInputShutdown() + " out " + connectStream.isOutputShutdown()
                    + " started " + connect.started.isDone() + " conn " + client.isActive();
            connectStream.close();
            fail("the server neither ended nor reset a session's CONNECT stream " + WAIT_MILLIS + " ms after the client's FIN (kind "
                    + kind + ", " + ByteBufUtil.hexDump(input) + ") " + state);
            return;
        }
        if (own.fin() && own.status() != 200) fail("a session ended without its 200: " + own);
        Response response = client.isActive() ? client.get() : null;
        if (response == null || !response.ok()) {
            rig.dropClient();
            Response again = rig.clientFor(-1).get();
            if (again == null || !again.ok()) fail("the server no longer serves a new connection: " + again);
        }
        awaitNoneInFlight(rig);
        rig.assertNoProblems();
    }

    /**
     * The opening the fuzzer builds on reaches the WebSocket: a 200, then the echo of a text frame sent in
     * a DATA frame; the client's FIN ends the stream, and the WebSocket is no longer in flight.
     */
    @Test
    void theWebSocketOpeningIsServedAndEchoes() throws Exception {
        Rig rig = Rig.get();
        rig.problems.clear();
        Client client = rig.clientFor(-1);
        Collector collector = new Collector();
        QuicStreamChannel stream = client.newStream(QuicStreamType.BIDIRECTIONAL, collector);
        if (stream == null) fail("no stream on a new connection");
        // A masked text frame "hello" (mask 0x01020304), in a DATA frame.
        byte[] masked = {(byte) 0x81, (byte) 0x85, 1, 2, 3, 4, 'h' ^ 1, 'e' ^ 2, 'l' ^ 3, 'l' ^ 4, 'o' ^ 1};
        ByteBuf data = Unpooled.buffer();
        writeVarint(data, 0x00);
        writeVarint(data, masked.length);
        data.writeBytes(masked);
        stream.write(extendedConnectFrame("websocket"));
        stream.writeAndFlush(data);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MILLIS);
        while (!collector.receivedSoFar().contains("\u0081\u0005hello")) {
            if (System.nanoTime() > deadline || collector.done.isDone()) fail("no echo of the text frame: " + collector.receivedSoFar());
            Thread.sleep(5);
        }
        stream.shutdownOutput();
        Response response = collector.done.get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
        if (!response.fin() || response.status() != 200) fail("the WebSocket's stream did not end with a FIN after its 200: " + response);
        awaitNoneInFlight(rig);
        rig.assertNoProblems();
    }

    /**
     * An extended CONNECT on https://localhost/, as Chromium sends one for a WebTransport session (literal
     * :protocol); a WebSocket's has its version header too.
     */
    static ByteBuf extendedConnectFrame(String protocol) {
        ByteBuf fields = Unpooled.buffer();
        fields.writeByte(0x00).writeByte(0x00);
        fields.writeByte(0xc0 | 15); // :method CONNECT
        byte[] name = ":protocol".getBytes(StandardCharsets.US_ASCII);
        fields.writeByte(0x20 | 7).writeByte(name.length - 7).writeBytes(name); // a literal name, 3-bit prefix
        fields.writeByte(protocol.length()).writeBytes(protocol.getBytes(StandardCharsets.US_ASCII));
        fields.writeByte(0xc0 | 23); // :scheme https
        fields.writeByte(0xc0 | 1); // :path /
        fields.writeByte(0x50 | 0); // :authority, literal value
        fields.writeByte(9).writeBytes("localhost".getBytes(StandardCharsets.US_ASCII));
        if (protocol.equals("websocket")) {
            byte[] version = "sec-websocket-version".getBytes(StandardCharsets.US_ASCII);
            fields.writeByte(0x20 | 7).writeByte(version.length - 7).writeBytes(version);
            fields.writeByte(2).writeBytes("13".getBytes(StandardCharsets.US_ASCII));
        }
        ByteBuf frame = Unpooled.buffer();
        writeVarint(frame, 0x01);
        writeVarint(frame, fields.readableBytes());
        frame.writeBytes(fields);
        fields.release();
        return frame;
    }

    @FuzzTest(maxDuration = "30s")
    void datagrams(FuzzedDataProvider data) throws Exception {
        int count = data.consumeInt(1, 4);
        int[] sizes = new int[count - 1];
        for (int i = 0; i < sizes.length; i++) sizes[i] = data.consumeInt(0, 1500);
        byte[] input = data.consumeRemainingAsBytes();
        Rig rig = Rig.get();
        rig.problems.clear();
        int from = 0;
        for (int i = 0; i < count; i++) {
            int size = i < sizes.length ? Math.min(sizes[i], input.length - from) : input.length - from;
            rig.udp.send(new DatagramPacket(input, from, size, rig.address));
            from += size;
        }
        // The client connected before (from the first input on), and a new one, are served.
        Response response = rig.clientFor(-1).get();
        if (response == null || !response.ok()) fail("a connected client is no longer served: " + response);
        Client fresh = rig.connect(true);
        try {
            Response again = fresh.get();
            if (again == null || !again.ok()) fail("a new client is not served: " + again);
        } finally {
            fresh.close();
        }
        awaitNoneInFlight(rig);
        rig.assertNoProblems();
    }

    @AfterAll
    static void stopServer() {
        Rig.stop();
    }

    private static void awaitNoneInFlight(Rig rig) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MILLIS);
        while (rig.connections.inFlight() != 0) {
            if (System.nanoTime() > deadline) {
                fail(rig.connections.inFlight() + " request(s) the application saw still in flight " + WAIT_MILLIS + " ms after the input");
            }
            Thread.sleep(1);
        }
    }

    // ---- QPACK and frames, by hand (the client has no HTTP/3 codec) ----

    /** A HEADERS frame for {@code method} https://localhost/, with static-table references only (RFC 9204 4.5). */
    static ByteBuf headersFrame(String method) {
        ByteBuf fields = Unpooled.buffer();
        fields.writeByte(0x00).writeByte(0x00); // Required Insert Count 0, Delta Base 0
        fields.writeByte(0xc0 | (method.equals("POST") ? 20 : 17)); // :method
        fields.writeByte(0xc0 | 23); // :scheme https
        fields.writeByte(0xc0 | 1); // :path /
        fields.writeByte(0x50 | 0); // :authority, literal value
        fields.writeByte(9).writeBytes("localhost".getBytes(StandardCharsets.US_ASCII));
        ByteBuf frame = Unpooled.buffer();
        writeVarint(frame, 0x01);
        writeVarint(frame, fields.readableBytes());
        frame.writeBytes(fields);
        fields.release();
        return frame;
    }

    static void writeVarint(ByteBuf out, long value) {
        if (value < 1 << 6) out.writeByte((int) value);
        else if (value < 1 << 14) out.writeShort((int) (0x4000 | value));
        else if (value < 1L << 30) out.writeInt((int) (0x80000000L | value));
        else out.writeLong(0xc000000000000000L | value);
    }

    private static long readVarint(ByteBuf in) {
        if (!in.isReadable()) return -1;
        int first = in.getUnsignedByte(in.readerIndex());
        int length = 1 << (first >> 6);
        if (in.readableBytes() < length) return -1;
        long value = in.readUnsignedByte() & 0x3f;
        for (int i = 1; i < length; i++) value = (value << 8) | in.readUnsignedByte();
        return value;
    }

    /** What came back on a request stream: its bytes, and whether it ended with a FIN (else a reset or the connection's end). */
    record Response(String hex, boolean fin, int status, String body) {
        boolean ok() {
            return fin && status == 200 && body.equals("ok");
        }

        boolean startsWithHeaders() {
            return hex.startsWith("01");
        }

        /** Parses the server's frames: the status from the first HEADERS (indexed static :status only), the DATA. */
        static Response parse(ByteBuf bytes, boolean fin) {
            String hex = ByteBufUtil.hexDump(bytes, bytes.readerIndex(), Math.min(bytes.readableBytes(), 256));
            int status = -1;
            StringBuilder body = new StringBuilder();
            ByteBuf in = bytes.duplicate();
            while (in.isReadable()) {
                long type = readVarint(in);
                long length = readVarint(in);
                if (type < 0 || length < 0 || length > in.readableBytes()) break;
                ByteBuf payload = in.readSlice((int) length);
                if (type == 0x01 && status < 0 && payload.readableBytes() >= 3) {
                    payload.skipBytes(2); // Required Insert Count and Delta Base: no dynamic table here
                    int line = payload.readUnsignedByte();
                    // An indexed field line from the static table: :status 103, 200, 304, 404, 503 are 24..28.
                    if ((line & 0xc0) == 0xc0) {
                        status = switch (line & 0x3f) {
                            case 24 -> 103;
                            case 25 -> 200;
                            case 26 -> 304;
                            case 27 -> 404;
                            case 28 -> 503;
                            default -> 0;
                        };
                    } else {
                        status = 0;
                    }
                } else if (type == 0x00) {
                    body.append(payload.toString(StandardCharsets.ISO_8859_1));
                }
            }
            return new Response(hex, fin, status, body.toString());
        }
    }

    /** Collects what the server sends on a stream; done at its FIN, or when the stream closes. */
    static final class Collector extends ChannelInboundHandlerAdapter {
        final CompletableFuture<Response> done = new CompletableFuture<>();
        /** The server's first bytes came. */
        final CompletableFuture<Void> started = new CompletableFuture<>();
        /** Not a ByteBuf: one left unreleased (a stream that never ends) would be reported as the server's leak. */
        private final ByteArrayOutputStream received = new ByteArrayOutputStream();

        /** What came so far, as ISO-8859-1 text; from the client's event loop while the stream reads. */
        synchronized String receivedSoFar() {
            return received.toString(StandardCharsets.ISO_8859_1);
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            // The server's FIN is an event, not the stream's close: a reset is told apart from it.
            QuicStreamChannel stream = (QuicStreamChannel) ctx.channel();
            if (stream.type() == QuicStreamType.BIDIRECTIONAL) stream.config().setAllowHalfClosure(true);
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            started.complete(null);
            if (msg instanceof ByteBuf buf && received.size() < 64 * 1024) {
                byte[] bytes = new byte[buf.readableBytes()];
                buf.readBytes(bytes);
                synchronized (this) {
                    received.writeBytes(bytes);
                }
            }
            ReferenceCountUtil.release(msg);
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt instanceof ChannelInputShutdownEvent) finish(true);
            ctx.fireUserEventTriggered(evt);
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            finish(false);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            // A reset by the server, or the connection's end: the stream is over.
            finish(false);
        }

        private void finish(boolean fin) {
            if (!done.isDone()) done.complete(Response.parse(Unpooled.wrappedBuffer(received.toByteArray()), fin));
        }
    }

    /** Accepts every WebTransport session, takes everything it receives, and ends each stream the client ends. */
    static final class AcceptingSessions implements WebTransportApplication {
        @Override
        public void dispatch(WebTransportSession session) {
            session.start(new WebTransportReceiver() {
                @Override
                public void onStreamData(long stream, ByteBuf data, boolean end) {
                    int size = data.readableBytes();
                    data.release();
                    session.consumed(size);
                    if (end && session.sendable(stream)) session.send(stream, Unpooled.EMPTY_BUFFER, true, null);
                }

                @Override public void onStreamReset(long stream, long code) {}

                @Override
                public void onDatagram(ByteBuf data) {
                    data.release();
                    session.datagramConsumed();
                }

                @Override public void onClose(long code, String reason) {}
            });
            session.accept(null, null);
        }
    }

    /** Drops whatever the server sends on its own unidirectional streams (control, QPACK). */
    @ChannelHandler.Sharable
    static final class Drain extends ChannelInboundHandlerAdapter {
        static final Drain INSTANCE = new Drain();

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ReferenceCountUtil.release(msg);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        }
    }

    /** One QUIC connection of the fuzzing client, and the unidirectional stream types it has opened. */
    static final class Client {
        final QuicChannel quic;
        final Set<Long> uniTypes = new HashSet<>();

        Client(QuicChannel quic) {
            this.quic = quic;
        }

        boolean isActive() {
            return quic.isActive();
        }

        /** A new stream, or null when the connection cannot open one (closed meanwhile, or no stream credit). */
        QuicStreamChannel newStream(QuicStreamType type, ChannelHandler handler) throws InterruptedException {
            var future = quic.newStreamBootstrap().type(type).handler(handler).create().await();
            return future.isSuccess() ? future.getNow() : null;
        }

        /** GET / on a new stream; null when no stream could be opened, a response without FIN when none came in time. */
        Response get() throws Exception {
            Collector collector = new Collector();
            QuicStreamChannel stream = newStream(QuicStreamType.BIDIRECTIONAL, collector);
            if (stream == null) return null;
            stream.writeAndFlush(headersFrame("GET")).addListener(QuicStreamChannel.SHUTDOWN_OUTPUT);
            try {
                return collector.done.get(WAIT_MILLIS, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                // What did come tells a response without its FIN from a request the server never finished.
                String partial = collector.receivedSoFar();
                stream.close();
                return new Response("(no end in " + WAIT_MILLIS + " ms on stream " + stream.streamId() + " after " + partial.length() + " bytes: "
                        + ByteBufUtil.hexDump(partial.getBytes(StandardCharsets.ISO_8859_1)) + ")", false, -1, "");
            }
        }

        void close() {
            quic.close().awaitUninterruptibly(WAIT_MILLIS);
        }
    }

    /** The server (one per JVM: the QUIC handshake is the expensive part) and the client's side of the loopback. */
    static final class Rig {
        private static Rig instance;

        final NioEventLoopGroup serverGroup = new NioEventLoopGroup(1, new DefaultThreadFactory("h3-fuzz-server", true));
        final NioEventLoopGroup clientGroup = new NioEventLoopGroup(1, new DefaultThreadFactory("h3-fuzz-client", true));
        final Connections connections = new Connections(1000, RequestMetrics.OFF);
        final InetSocketAddress address;
        final Channel clientSocket;
        final DatagramSocket udp;
        final ConcurrentLinkedQueue<String> problems = new ConcurrentLinkedQueue<>();
        private final Channel server;
        private final Handler logWatch = new LogWatch();
        private Client client;

        static synchronized Rig get() throws Exception {
            if (instance == null) instance = new Rig();
            return instance;
        }

        static synchronized void stop() {
            if (instance == null) return;
            Rig rig = instance;
            instance = null;
            rig.dropClient();
            rig.clientSocket.close().awaitUninterruptibly();
            rig.server.close().awaitUninterruptibly();
            rig.udp.close();
            rig.clientGroup.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            rig.serverGroup.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
            for (String logger : WATCHED_LOGGERS) Logger.getLogger(logger).removeHandler(rig.logWatch);
        }

        private Rig() throws Exception {
            HttpSettings settings = AnsweringApplication.settings("app:app", "--max-body", "4096", "--max-header-size", "2048", "--graceful-timeout", "0",
                    "--keep-alive", "600000"); // no idle close between inputs: the client's connection is reused
            KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
            generator.initialize(256);
            KeyPair keys = generator.generateKeyPair();
            X500Name name = new X500Name("CN=localhost");
            Date now = new Date();
            X509Certificate certificate = new JcaX509CertificateConverter().getCertificate(new JcaX509v3CertificateBuilder(
                    name, BigInteger.ONE, new Date(now.getTime() - 86_400_000L), new Date(now.getTime() + 86_400_000L), name, keys.getPublic())
                    .build(new JcaContentSignerBuilder("SHA256withECDSA").build(keys.getPrivate())));
            QuicSslContext serverTls = QuicSslContextBuilder.forServer(keys.getPrivate(), null, certificate)
                    .applicationProtocols(Http3.supportedApplicationProtocols()).build();
            server = Http3Setup.bind(serverGroup, "127.0.0.1", 0, false,
                    Http3Setup.quicCodec(ch -> serverTls.newEngine(ch.alloc()), new RequestCore(settings, connections, new AnsweringApplication()), new AcceptingSessions(),
                            new EchoingWebSockets()));
            address = (InetSocketAddress) server.localAddress();

            QuicSslContext clientTls = QuicSslContextBuilder.forClient().trustManager(InsecureTrustManagerFactory.INSTANCE)
                    .applicationProtocols(Http3.supportedApplicationProtocols()).build();
            ChannelHandler clientCodec = Http3.newQuicClientCodecBuilder()
                    .sslContext(clientTls)
                    .maxIdleTimeout(600, TimeUnit.SECONDS)
                    .initialMaxData(10_000_000)
                    .initialMaxStreamDataBidirectionalLocal(1_000_000)
                    .initialMaxStreamDataBidirectionalRemote(1_000_000)
                    .initialMaxStreamDataUnidirectional(1_000_000)
                    .initialMaxStreamsUnidirectional(100)
                    .build();
            clientSocket = new Bootstrap().group(clientGroup).channel(NioDatagramChannel.class).handler(clientCodec)
                    .bind(new InetSocketAddress("127.0.0.1", 0)).sync().channel();
            udp = new DatagramSocket(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            for (String logger : WATCHED_LOGGERS) Logger.getLogger(logger).addHandler(logWatch);
        }

        /**
         * The connection for the next input: the current one while it is open, has stream credit left and
         * has not opened a stream of this unidirectional type (a second control or QPACK stream is an error
         * of its own); else a new one. A new connection opens the client's control stream (SETTINGS) at
         * once, unless the input is to be the control stream. {@code uniType} -1 for a request stream.
         */
        Client clientFor(long uniType) throws Exception {
            if (client != null && (!client.isActive() || client.uniTypes.contains(uniType)
                    || client.quic.peerAllowedStreams(QuicStreamType.BIDIRECTIONAL) < 2
                    || (uniType >= 0 && client.quic.peerAllowedStreams(QuicStreamType.UNIDIRECTIONAL) < 1))) {
                client.close();
                client = null;
            }
            if (client == null) client = connect(uniType != 0x00);
            if (uniType >= 0) client.uniTypes.add(uniType);
            return client;
        }

        /** A new connection; with {@code controlStream}, the client's control stream (an empty SETTINGS) is opened at once. */
        Client connect(boolean controlStream) throws Exception {
            QuicChannel quic = QuicChannel.newBootstrap(clientSocket)
                    .handler(Drain.INSTANCE)
                    .streamHandler(Drain.INSTANCE)
                    .remoteAddress(address)
                    .connect().get(4 * WAIT_MILLIS, TimeUnit.MILLISECONDS); // the first one loads TLS and quiche too
            Client connected = new Client(quic);
            if (controlStream) {
                QuicStreamChannel control = connected.newStream(QuicStreamType.UNIDIRECTIONAL, Drain.INSTANCE);
                if (control == null) fail("no control stream on a new connection");
                control.writeAndFlush(Unpooled.wrappedBuffer(new byte[] {0x00, 0x04, 0x00})); // control, SETTINGS {}
                connected.uniTypes.add(0x00L);
            }
            return connected;
        }

        void dropClient() {
            if (client != null) client.close();
            client = null;
        }

        private static final List<String> WATCHED_LOGGERS = List.of("io.netty", "peregrine", "dev.peregrine");

        /**
         * Warnings and errors logged by Netty or the server are findings: an exception that reached the end
         * of a pipeline, a handler's complaint, a buffer leak. A client must not be able to cause them.
         */
        private final class LogWatch extends Handler {
            @Override
            public void publish(LogRecord record) {
                if (record.getLevel().intValue() < Level.WARNING.intValue()) return;
                StringBuilder text = new StringBuilder(record.getLoggerName()).append(": ").append(record.getMessage());
                Throwable thrown = record.getThrown();
                if (thrown != null) {
                    StringWriter trace = new StringWriter();
                    thrown.printStackTrace(new PrintWriter(trace));
                    text.append('\n').append(trace);
                }
                problems.add(text.toString());
            }

            @Override public void flush() {}
            @Override public void close() {}
        }

        void assertNoProblems() {
            if (!problems.isEmpty()) {
                List<String> seen = new ArrayList<>(problems);
                problems.clear();
                fail("logged while serving the input:\n" + String.join("\n", seen));
            }
        }
    }
}
