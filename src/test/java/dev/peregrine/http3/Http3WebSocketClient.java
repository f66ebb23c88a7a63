package dev.peregrine.http3;

import dev.peregrine.webtransport.Varint;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelDuplexHandler;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPromise;
import io.netty.channel.nio.NioEventLoopGroup;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.nio.NioDatagramChannel;
import io.netty.handler.codec.http.websocketx.BinaryWebSocketFrame;
import io.netty.handler.codec.http.websocketx.CloseWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PingWebSocketFrame;
import io.netty.handler.codec.http.websocketx.PongWebSocketFrame;
import io.netty.handler.codec.http.websocketx.TextWebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocket13FrameDecoder;
import io.netty.handler.codec.http.websocketx.WebSocket13FrameEncoder;
import io.netty.handler.codec.http.websocketx.WebSocketDecoderConfig;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.WebSocketFrameAggregator;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketClientExtension;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtension;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionData;
import io.netty.handler.codec.http.websocketx.extensions.compression.PerMessageDeflateClientExtensionHandshaker;
import io.netty.handler.ssl.util.InsecureTrustManagerFactory;
import io.netty.incubator.codec.http3.DefaultHttp3SettingsFrame;
import io.netty.incubator.codec.http3.Http3;
import io.netty.incubator.codec.http3.Http3ClientConnectionHandler;
import io.netty.incubator.codec.http3.Http3SettingsFrame;
import io.netty.incubator.codec.quic.QuicChannel;
import io.netty.incubator.codec.quic.QuicConnectionCloseEvent;
import io.netty.incubator.codec.quic.QuicSslContext;
import io.netty.incubator.codec.quic.QuicSslContextBuilder;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.incubator.codec.quic.QuicStreamType;
import io.netty.util.ReferenceCountUtil;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A WebSocket over HTTP/3 client (RFC 9220) for the end-to-end tests (test_websocket_h3.py), which run it
 * as a subprocess: no browser and no Python library on these machines speaks it. Netty's QUIC and its
 * HTTP/3 connection handler (control and QPACK streams, SETTINGS) carry the connection; the request
 * stream is framed here (varints and QPACK integers with the server's own helpers), because the incubator HTTP/3 codec (0.0.30) refuses to send {@code :protocol}
 * as it refuses to receive it. The HEADERS are QPACK literals (no dynamic table, no Huffman), which is
 * also all the server sends on such a stream; the WebSocket frames are Netty's client codec.
 *
 * <p>Commands come on stdin, one a line, fields separated by tabs; events go to stdout as JSON, one a line:
 * <pre>
 * open NAME PATH [name: value]...   extended CONNECT    → {"event":"headers","stream":..,"status":..,"headers":{..}}
 * open-fin NAME PATH [name: value]... the same, and the stream's end right after it
 * text NAME TEXT | binary NAME SIZE  a message (binary: SIZE bytes, byte i = i mod 256)
 * close NAME CODE [REASON]           a close frame      → {"event":"close","code":..,"reason":..} from the server
 * flood NAME COUNT SIZE             COUNT binary messages at once → {"event":"flooded"} once QUIC took them all
 * progress NAME                      → {"event":"progress","written":..,"writable":..}: messages QUIC took so far
 * fin NAME | reset NAME CODE         end or reset the stream → {"event":"end"|"reset",..} when the server does
 * trailers NAME                      a HEADERS frame after the CONNECT's
 * mute NAME                          pings are no longer answered
 * </pre>
 * Messages from the server: {@code {"event":"message","type":"text","data":..}} or, for binary, their
 * length and SHA-256; {@code "rsv1"} says whether the message came compressed. A 200 that agrees to
 * {@code permessage-deflate} (offered with an open's {@code sec-websocket-extensions}) puts Netty's deflate
 * extension on the stream for both directions. At the start: {@code {"event":"settings","settings":{..}}}, the server's SETTINGS.
 */
public final class Http3WebSocketClient {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private final Map<String, QuicStreamChannel> streams = new HashMap<>();
    private final QuicChannel quic;

    private Http3WebSocketClient(QuicChannel quic) {
        this.quic = quic;
    }

    public static void main(String[] args) throws Exception {
        NioEventLoopGroup group = new NioEventLoopGroup(1);
        QuicSslContext tls = QuicSslContextBuilder.forClient().trustManager(InsecureTrustManagerFactory.INSTANCE)
                .applicationProtocols(Http3.supportedApplicationProtocols()).build();
        ChannelHandler codec = Http3.newQuicClientCodecBuilder()
                .sslContext(tls)
                .maxIdleTimeout(120, TimeUnit.SECONDS)
                .initialMaxData(64L << 20)
                .initialMaxStreamDataBidirectionalLocal(1 << 20)
                .initialMaxStreamDataBidirectionalRemote(1 << 20)
                .initialMaxStreamDataUnidirectional(1 << 20)
                .initialMaxStreamsUnidirectional(100)
                .build();
        Channel socket = new Bootstrap().group(group).channel(NioDatagramChannel.class).handler(codec)
                .bind(new InetSocketAddress(0)).sync().channel();
        QuicChannel quic = QuicChannel.newBootstrap(socket)
                .handler(new Http3ClientConnectionHandler(new SettingsPrinter(), null, null, new DefaultHttp3SettingsFrame(), true))
                .remoteAddress(new InetSocketAddress(args[0], Integer.parseInt(args[1])))
                .connect().get(30, TimeUnit.SECONDS);
        quic.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
                if (evt instanceof QuicConnectionCloseEvent close) {
                    event("\"event\":\"connection-close\",\"application\":" + close.isApplicationClose() + ",\"code\":" + close.error()
                            + ",\"reason\":" + json(new String(close.reason(), StandardCharsets.UTF_8)));
                }
                ctx.fireUserEventTriggered(evt);
            }
        });
        quic.closeFuture().addListener(f -> event("\"event\":\"connection-closed\""));
        Http3WebSocketClient client = new Http3WebSocketClient(quic);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isBlank()) continue;
            String[] command = line.split("\t");
            try {
                client.run(command);
            } catch (Exception e) {
                event("\"event\":\"error\",\"message\":" + json(String.valueOf(e)));
            }
        }
        quic.close().awaitUninterruptibly(5000);
        group.shutdownGracefully(0, 0, TimeUnit.MILLISECONDS);
    }

    private void run(String[] command) throws Exception {
        String name = command[1];
        if (command[0].equals("open") || command[0].equals("open-fin")) {
            Map<String, String> headers = new LinkedHashMap<>();
            for (int i = 3; i < command.length; i++) {
                int colon = command[i].indexOf(':', 1);
                headers.put(command[i].substring(0, colon).trim(), command[i].substring(colon + 1).trim());
            }
            QuicStreamChannel stream = quic.newStreamBootstrap().type(QuicStreamType.BIDIRECTIONAL)
                    .handler(new WebSocketStream(name)).create().get(10, TimeUnit.SECONDS);
            streams.put(name, stream);
            boolean fin = command[0].equals("open-fin");
            stream.eventLoop().execute(() -> {
                stream.writeAndFlush(new Raw(connect(command[2], headers)));
                if (fin) stream.shutdownOutput();
            });
            return;
        }
        QuicStreamChannel stream = streams.get(name);
        stream.eventLoop().execute(() -> {
            switch (command[0]) {
                case "text" -> stream.writeAndFlush(new TextWebSocketFrame(command[2]));
                case "binary" -> stream.writeAndFlush(new BinaryWebSocketFrame(Unpooled.wrappedBuffer(pattern(Integer.parseInt(command[2])))));
                case "close" -> stream.writeAndFlush(new CloseWebSocketFrame(Integer.parseInt(command[2]), command.length > 3 ? command[3] : ""));
                case "flood" -> ((WebSocketStream) stream.pipeline().first()).flood(stream, Integer.parseInt(command[2]),
                        Integer.parseInt(command[3]));
                case "progress" -> ((WebSocketStream) stream.pipeline().first()).progress(stream);
                case "fin" -> stream.shutdownOutput();
                case "reset" -> stream.shutdown(Integer.parseInt(command[2]));
                case "trailers" -> stream.writeAndFlush(new Raw(headersFrame(Map.of("x-trailer", "1"))));
                case "mute" -> stream.pipeline().get(Printer.class).muted = true;
                default -> event("\"event\":\"error\",\"message\":" + json("unknown command " + command[0]));
            }
        });
    }

    static byte[] pattern(int size) {
        byte[] bytes = new byte[size];
        for (int i = 0; i < size; i++) bytes[i] = (byte) i;
        return bytes;
    }

    // ---- HTTP/3 and QPACK, by hand ----

    private static ByteBuf connect(String path, Map<String, String> headers) {
        Map<String, String> fields = new LinkedHashMap<>();
        fields.put(":method", "CONNECT");
        fields.put(":protocol", "websocket");
        fields.put(":scheme", "https");
        fields.put(":path", path);
        fields.put(":authority", "localhost");
        fields.put("sec-websocket-version", "13");
        fields.putAll(headers);
        return headersFrame(fields);
    }

    /** Required Insert Count 0, Base 0, and each field a literal with a literal name (001NHxxx), not Huffman-coded. */
    private static ByteBuf headersFrame(Map<String, String> fields) {
        ByteBuf section = Unpooled.buffer();
        section.writeByte(0).writeByte(0);
        for (Map.Entry<String, String> field : fields.entrySet()) {
            string(section, 0x20, 3, field.getKey().getBytes(StandardCharsets.US_ASCII));
            string(section, 0x00, 7, field.getValue().getBytes(StandardCharsets.ISO_8859_1));
        }
        ByteBuf frame = Unpooled.buffer();
        Varint.write(frame, 0x01);
        Varint.write(frame, section.readableBytes());
        frame.writeBytes(section);
        section.release();
        return frame;
    }

    private static void string(ByteBuf out, int pattern, int prefixBits, byte[] bytes) {
        QpackLiterals.prefixed(out, pattern, prefixBits, bytes.length);
        out.writeBytes(bytes);
    }

    private static long prefixed(ByteBuf in, int prefixBits) {
        int max = (1 << prefixBits) - 1;
        long value = in.readUnsignedByte() & max;
        if (value < max) return value;
        for (int shift = 0; ; shift += 7) {
            int b = in.readUnsignedByte();
            value += (long) (b & 0x7f) << shift;
            if ((b & 0x80) == 0) return value;
        }
    }

    private static String literal(ByteBuf in, int prefixBits) {
        boolean huffman = (in.getUnsignedByte(in.readerIndex()) & (1 << prefixBits)) != 0;
        int length = (int) prefixed(in, prefixBits);
        String value = in.readCharSequence(length, StandardCharsets.ISO_8859_1).toString();
        if (huffman) throw new IllegalStateException("a Huffman-coded string, which this client does not decode");
        return value;
    }

    /** The static entries (RFC 9204 Appendix A) a server answer may name. */
    private static final Map<Integer, String[]> STATIC = Map.of(
            24, new String[] {":status", "103"}, 25, new String[] {":status", "200"}, 26, new String[] {":status", "304"},
            27, new String[] {":status", "404"}, 28, new String[] {":status", "503"}, 4, new String[] {"content-length", "0"},
            52, new String[] {"content-type", "text/plain;charset=utf-8"}, 92, new String[] {"server", ""}, 6, new String[] {"date", ""});

    private static Map<String, String> decodeSection(ByteBuf in) {
        Map<String, String> fields = new LinkedHashMap<>();
        prefixed(in, 8);
        prefixed(in, 7);
        while (in.isReadable()) {
            int first = in.getUnsignedByte(in.readerIndex());
            if ((first & 0x80) != 0) { // indexed field line
                if ((first & 0x40) == 0) throw new IllegalStateException("a dynamic table reference");
                String[] entry = STATIC.get((int) prefixed(in, 6));
                fields.put(entry[0], entry[1]);
            } else if ((first & 0x40) != 0) { // literal with a name reference
                if ((first & 0x10) == 0) throw new IllegalStateException("a dynamic name reference");
                String[] entry = STATIC.get((int) prefixed(in, 4));
                fields.put(entry[0], literal(in, 7));
            } else if ((first & 0x20) != 0) { // literal with a literal name
                String name = literal(in, 3);
                fields.put(name, literal(in, 7));
            } else {
                throw new IllegalStateException("a post-base field line");
            }
        }
        return fields;
    }

    /** Bytes that go onto the stream as they are, not in a DATA frame. */
    private record Raw(ByteBuf bytes) {}

    /**
     * One WebSocket's stream: HTTP/3 frames below, the WebSocket codec above once a 200 came. DATA of
     * any other answer is its body, printed at the stream's end.
     */
    private static final class WebSocketStream extends ChannelDuplexHandler {
        private static final String FRAME_DECODER = "frame-decoder";
        private final String name;
        private ByteBuf frames = Unpooled.buffer();
        private long dataLeft;
        private int status = -1;
        private final StringBuilder body = new StringBuilder();
        private int written, flooding;

        WebSocketStream(String name) {
            this.name = name;
        }

        void flood(QuicStreamChannel stream, int count, int size) {
            flooding = count;
            byte[] payload = pattern(size);
            for (int i = 0; i < count; i++) {
                stream.write(new BinaryWebSocketFrame(Unpooled.wrappedBuffer(payload))).addListener(future -> {
                    if (future.isSuccess() && ++written == flooding) event(name, "\"event\":\"flooded\"");
                });
            }
            stream.flush();
        }

        void progress(QuicStreamChannel stream) {
            event(name, "\"event\":\"progress\",\"written\":" + written + ",\"writable\":" + stream.isWritable());
        }

        @Override
        public void handlerAdded(ChannelHandlerContext ctx) {
            ((QuicStreamChannel) ctx.channel()).config().setAllowHalfClosure(true);
            ctx.pipeline().addLast(new WebSocket13FrameEncoder(true));
            ctx.pipeline().addLast(FRAME_DECODER, new WebSocket13FrameDecoder(WebSocketDecoderConfig.newBuilder().expectMaskedFrames(false)
                    .maxFramePayloadLength(64 << 20).allowExtensions(true).closeOnProtocolViolation(false).build()));
            ctx.pipeline().addLast(new WebSocketFrameAggregator(64 << 20), new Printer(name));
        }

        /** The extension the server agreed to, between the frame codec and the messages (only permessage-deflate is offered). */
        private static void agreed(ChannelHandlerContext ctx, String header) {
            String[] parts = header.split(";");
            Map<String, String> parameters = new HashMap<>();
            for (int i = 1; i < parts.length; i++) {
                String[] parameter = parts[i].trim().split("=", 2);
                parameters.put(parameter[0].trim(), parameter.length > 1 ? parameter[1].trim() : null);
            }
            WebSocketClientExtension extension = new PerMessageDeflateClientExtensionHandshaker(6, true, 15, true, false)
                    .handshakeExtension(new WebSocketExtensionData(parts[0].trim(), parameters));
            if (extension == null) throw new IllegalStateException("an extension this client did not offer: " + header);
            ctx.pipeline().addAfter(FRAME_DECODER, "rsv", new RsvTap(ctx.pipeline().get(Printer.class)));
            ctx.pipeline().addAfter("rsv", "deflate-decoder", extension.newExtensionDecoder());
            ctx.pipeline().addAfter(FRAME_DECODER, "deflate-encoder", extension.newExtensionEncoder());
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            ByteBuf in = (ByteBuf) msg;
            frames.writeBytes(in);
            in.release();
            while (frames.isReadable()) {
                if (dataLeft > 0) {
                    int take = (int) Math.min(dataLeft, frames.readableBytes());
                    dataLeft -= take;
                    ByteBuf payload = frames.readBytes(take); // a copy: frames is compacted below
                    if (status == 200) {
                        ctx.fireChannelRead(payload);
                    } else {
                        body.append(payload.toString(StandardCharsets.UTF_8));
                        payload.release();
                    }
                    continue;
                }
                int start = frames.readerIndex();
                long type = Varint.readable(frames) ? Varint.read(frames) : -1;
                long length = type >= 0 && Varint.readable(frames) ? Varint.read(frames) : -1;
                if (length < 0 || (type != 0x00 && frames.readableBytes() < length)) {
                    frames.readerIndex(start);
                    break;
                }
                if (type == 0x00) {
                    dataLeft = length;
                } else if (type == 0x01) {
                    Map<String, String> fields = decodeSection(frames.readSlice((int) length));
                    status = Integer.parseInt(fields.remove(":status"));
                    if (status == 200 && fields.containsKey("sec-websocket-extensions")) agreed(ctx, fields.get("sec-websocket-extensions"));
                    StringBuilder headers = new StringBuilder();
                    for (Map.Entry<String, String> field : fields.entrySet()) {
                        headers.append(headers.isEmpty() ? "" : ",").append(json(field.getKey())).append(':').append(json(field.getValue()));
                    }
                    event(name, "\"event\":\"headers\",\"status\":" + status + ",\"headers\":{" + headers + "}");
                } else {
                    frames.skipBytes((int) length);
                }
            }
            frames.discardReadBytes();
        }

        @Override
        public void write(ChannelHandlerContext ctx, Object msg, ChannelPromise promise) {
            if (msg instanceof Raw raw) {
                ctx.write(raw.bytes(), promise);
                return;
            }
            ByteBuf data = (ByteBuf) msg;
            if (data.isReadable()) {
                ByteBuf header = ctx.alloc().buffer(9);
                Varint.write(header, 0x00);
                Varint.write(header, data.readableBytes());
                ctx.write(header);
            }
            ctx.write(data, promise);
        }

        @Override
        public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
            if (evt instanceof ChannelInputShutdownEvent) {
                event(name, "\"event\":\"end\",\"body\":" + json(body.toString()));
            }
            ctx.fireUserEventTriggered(evt);
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            event(name, "\"event\":\"reset\",\"message\":" + json(String.valueOf(cause)));
        }

        @Override
        public void channelInactive(ChannelHandlerContext ctx) {
            frames.release();
            event(name, "\"event\":\"closed\"");
            ctx.fireChannelInactive();
        }
    }

    /** Notes whether a message's first frame came compressed (RSV1), ahead of the extension that clears it. */
    private static final class RsvTap extends ChannelInboundHandlerAdapter {
        private final Printer printer;

        RsvTap(Printer printer) {
            this.printer = printer;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof TextWebSocketFrame || msg instanceof BinaryWebSocketFrame) {
                printer.rsv1 = (((WebSocketFrame) msg).rsv() & WebSocketExtension.RSV1) != 0;
            }
            ctx.fireChannelRead(msg);
        }
    }

    /** Prints the server's messages and close; answers pings unless muted. */
    private static final class Printer extends ChannelInboundHandlerAdapter {
        private final String name;
        boolean rsv1;
        volatile boolean muted;

        Printer(String name) {
            this.name = name;
        }

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            try {
                switch (msg) {
                    case TextWebSocketFrame text -> event(name, "\"event\":\"message\",\"type\":\"text\",\"data\":" + json(text.text())
                            + ",\"rsv1\":" + rsv1);
                    case BinaryWebSocketFrame binary -> event(name, "\"event\":\"message\",\"type\":\"binary\",\"length\":"
                            + binary.content().readableBytes() + ",\"sha256\":\"" + sha256(binary.content()) + "\",\"rsv1\":" + rsv1);
                    case CloseWebSocketFrame close -> event(name, "\"event\":\"close\",\"code\":" + close.statusCode() + ",\"reason\":"
                            + json(close.reasonText()));
                    case PingWebSocketFrame ping -> {
                        if (!muted) ctx.writeAndFlush(new PongWebSocketFrame(ping.content().retain()));
                        event(name, "\"event\":\"ping\"");
                    }
                    default -> {}
                }
            } finally {
                ReferenceCountUtil.release(msg);
            }
        }

        @Override
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            event(name, "\"event\":\"reset\",\"message\":" + json(String.valueOf(cause)));
        }
    }

    /** Prints the server's SETTINGS, which come on its control stream. */
    private static final class SettingsPrinter extends ChannelInboundHandlerAdapter {
        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            if (msg instanceof Http3SettingsFrame settings) {
                StringBuilder values = new StringBuilder();
                for (Map.Entry<Long, Long> setting : settings) {
                    values.append(values.isEmpty() ? "" : ",").append('"').append(setting.getKey()).append("\":").append(setting.getValue());
                }
                event("\"event\":\"settings\",\"settings\":{" + values + "}");
            }
            ReferenceCountUtil.release(msg);
        }
    }

    private static String sha256(ByteBuf bytes) {
        try {
            MessageDigest digest = MessageDigest.getInstance("SHA-256");
            digest.update(bytes.nioBuffer());
            return ByteBufUtil.hexDump(digest.digest());
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static void event(String stream, String fields) {
        event("\"stream\":" + json(stream) + "," + fields);
    }

    private static synchronized void event(String fields) {
        OUT.println("{" + fields + "}");
    }

    private static String json(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        return out.append('"').toString();
    }
}
