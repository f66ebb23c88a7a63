package dev.peregrine.http3;

import dev.peregrine.webtransport.Varint;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandler;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.handler.codec.ByteToMessageDecoder;
import io.netty.incubator.codec.http3.DefaultHttp3Headers;
import io.netty.incubator.codec.quic.QuicStreamChannel;
import io.netty.util.AsciiString;

import java.nio.charset.StandardCharsets;

/**
 * The first handler of every bidirectional stream a client opens, ahead of Netty's HTTP/3 frame codec:
 * it looks at the stream's first bytes and takes away from the codec what the codec would refuse.
 * <ul>
 *   <li>a WebTransport stream (its first varint is WEBTRANSPORT_STREAM, 0x41): the codec would read it as
 *       an unknown frame;</li>
 *   <li>an extended CONNECT (RFC 9220, {@code :protocol}): the incubator codec (0.0.30) refuses the
 *       pseudo-header, so the HEADERS frame is decoded here first (see {@link QpackSections}), and the
 *       stream goes to a WebSocket ({@link Http3WebSocket}) or a WebTransport session.</li>
 * </ul>
 * Anything else (every ordinary request) goes on to the codec untouched, and this handler leaves.
 */
final class ExtendedConnect extends ChannelInboundHandlerAdapter {
    static final long WEBTRANSPORT_STREAM = 0x41;
    private static final long HEADERS = 0x01;
    /** QPACK's static index of {@code :method CONNECT} (RFC 9204 Appendix A). */
    private static final int STATIC_CONNECT = 15;
    private static final byte[] METHOD = ":method".getBytes(StandardCharsets.US_ASCII);

    private final Http3Connection connection;
    private ByteBuf held;

    ExtendedConnect(Http3Connection connection) {
        this.connection = connection;
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        if (!(msg instanceof ByteBuf in)) {
            ctx.fireChannelRead(msg);
            return;
        }
        held = held == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), held, in);
        decide(ctx);
    }

    @Override
    public void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        // The stream ended before its first frame was whole: the codec says what that is.
        if (evt instanceof ChannelInputShutdownEvent && held != null) passOn(ctx);
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    public void handlerRemoved(ChannelHandlerContext ctx) {
        if (held != null) {
            held.release();
            held = null;
        }
    }

    private void decide(ChannelHandlerContext ctx) {
        int at = held.readerIndex();
        if (!Varint.readable(held)) return;
        long type = Varint.get(held, at);
        int typeLength = Varint.length(held.getByte(at));
        if (type == WEBTRANSPORT_STREAM) {
            held.skipBytes(typeLength);
            ByteBuf rest = held;
            held = null;
            handOver(ctx, new WebTransportStream(connection, true), rest);
            return;
        }
        if (type != HEADERS) {
            passOn(ctx);
            return;
        }
        held.readerIndex(at + typeLength);
        if (!Varint.readable(held)) {
            held.readerIndex(at);
            return;
        }
        long length = Varint.read(held);
        int payloadStart = held.readerIndex();
        held.readerIndex(at);
        if (length > connection.settings().maxHeadSize()) {
            passOn(ctx); // the codec refuses it for its size
            return;
        }
        if (held.writerIndex() - payloadStart < length) return;
        if (!mayBeConnect(held, payloadStart, (int) length)) {
            passOn(ctx);
            return;
        }
        DefaultHttp3Headers headers = new DefaultHttp3Headers(false);
        QuicStreamChannel channel = (QuicStreamChannel) ctx.channel();
        held.readerIndex(payloadStart);
        try {
            QpackSections.decode(connection.quic(), channel.streamId(), held, (int) length, headers::add);
        } catch (QpackSections.Malformed e) {
            held.readerIndex(at);
            passOn(ctx); // the codec answers for the section (or, if only the reflection failed, refuses :protocol as before)
            return;
        }
        CharSequence protocol = headers.get(":protocol");
        if (protocol == null || !AsciiString.contentEqualsIgnoreCase(headers.method(), "CONNECT")) {
            held.readerIndex(at);
            passOn(ctx);
            return;
        }
        ByteBuf rest = held;
        held = null;
        handOver(ctx, AsciiString.contentEqualsIgnoreCase(protocol, "websocket") ? new Http3WebSocket(connection, headers)
                : new Http3WebTransport(connection, headers, protocol), rest);
    }

    /**
     * Whether a field section may hold {@code :method CONNECT}: by its static index (what browsers send)
     * or by a literal with {@code :method}'s name, referenced or spelled out. Only those are decoded here;
     * everything else is decoded once, by the codec.
     */
    private static boolean mayBeConnect(ByteBuf section, int from, int length) {
        for (int i = from, end = from + length; i < end; i++) {
            int b = section.getByte(i) & 0xff;
            if (b == (0xc0 | STATIC_CONNECT)) return true;
            // a literal with a static name reference, index 15 to 21 (:method's entries): 01N1 1111, then 0 to 6
            if ((b & 0xdf) == 0x5f && i + 1 < end && (section.getByte(i + 1) & 0xff) <= 21 - STATIC_CONNECT) return true;
            // a literal name, not Huffman-coded, of 7 bytes (its 3-bit prefix full, then 0): 001N 0111 0000 0000 ":method"
            if ((b & 0xef) == 0x27 && i + 2 + METHOD.length <= end && section.getByte(i + 1) == 0 && startsWith(section, i + 2, METHOD)) {
                return true;
            }
        }
        return false;
    }

    private static boolean startsWith(ByteBuf bytes, int at, byte[] prefix) {
        for (int k = 0; k < prefix.length; k++) if (bytes.getByte(at + k) != prefix[k]) return false;
        return true;
    }

    /** Leaves the stream to the HTTP/3 codec, with what was read so far. */
    private void passOn(ChannelHandlerContext ctx) {
        ByteBuf bytes = held;
        held = null;
        ctx.pipeline().remove(this);
        if (bytes != null) ctx.fireChannelRead(bytes);
    }

    /** Takes the stream away from the HTTP/3 codec: {@code handler} alone reads it, from {@code rest} on. */
    private void handOver(ChannelHandlerContext ctx, ChannelHandler handler, ByteBuf rest) {
        ChannelPipeline pipeline = ctx.pipeline();
        while (pipeline.last() != this) pipeline.removeLast();
        pipeline.replace(this, null, handler);
        pipeline.fireChannelRead(rest);
        pipeline.fireChannelReadComplete();
    }
}
