package dev.peregrine.http2;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.peregrine.http.Connections;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.metrics.RequestMetrics;
import dev.peregrine.testing.AnsweringApplication;
import dev.peregrine.testing.EchoingWebSockets;
import dev.peregrine.testing.FuzzPieces;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http2.DefaultHttp2FrameWriter;
import io.netty.handler.codec.http2.DefaultHttp2Headers;
import io.netty.handler.codec.http2.Http2CodecUtil;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.handler.codec.http2.Http2Settings;
import io.netty.util.ReferenceCountUtil;


import org.junit.jupiter.api.Test;

import java.util.function.BiConsumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Fuzzes what an HTTP/2 client talks to: the server's setup of Netty's frame codec (its limits and
 * abuse checks) and {@link Http2Connection}, behind a valid preface, with an application that reads
 * every body and answers every request, and WebSockets (RFC 8441) that echo. Whatever the frames, nothing
 * may throw out of the pipeline, the server's output must be a sequence of whole frames, and every
 * request and WebSocket the application saw must end (answered, reset or cut by the connection's
 * close): no stream may be left hanging.
 */
class Http2FuzzTest {
    private static final HttpSettings SETTINGS = AnsweringApplication.settings("app:app", "--max-body", "4096", "--max-header-size", "2048", "--graceful-timeout", "0");


    @FuzzTest(maxDuration = "30s")
    void frames(FuzzedDataProvider data) {
        int pieces = data.consumeInt(1, 8);
        boolean webSocket = data.consumeBoolean();
        byte[] input = data.consumeRemainingAsBytes();
        Connections connections = new Connections(100, RequestMetrics.OFF);
        EmbeddedChannel channel = new EmbeddedChannel();
        Http2Setup.configure(channel.pipeline(), new RequestCore(SETTINGS, connections, new AnsweringApplication()), new EchoingWebSockets());
        try {
            ByteBuf preface = Http2CodecUtil.connectionPrefaceBuf();
            channel.writeInbound(preface);
            // Random bytes almost never spell a valid extended CONNECT: half the inputs open a WebSocket on
            // stream 1 first, so that what follows (DATA, resets, window updates...) reaches its stream channel.
            if (webSocket) {
                channel.writeInbound(webSocketConnect());
                channel.runPendingTasks();
            }
            for (byte[] piece : FuzzPieces.split(input, pieces)) {
                if (!channel.isActive()) break;
                channel.writeInbound(Unpooled.wrappedBuffer(piece));
                channel.runPendingTasks();
            }
            channel.checkException();
            assertWholeFrames(channel);
        } finally {
            channel.finishAndReleaseAll();
        }
        assertEquals(0, connections.inFlight(), "a stream was left in flight after the connection closed");
    }

    /** The opening the fuzzer builds on reaches the WebSocket: its text frame comes back, after a 200. */
    @Test
    void theWebSocketOpeningIsServedAndEchoes() {
        Connections connections = new Connections(100, RequestMetrics.OFF);
        EmbeddedChannel channel = serverWithAWebSocket(connections);
        try {
            ByteBuf out = Unpooled.buffer();
            for (Object msg; (msg = channel.readOutbound()) != null; ) {
                out.writeBytes((ByteBuf) msg);
                ((ByteBuf) msg).release();
            }
            byte[] echo = {(byte) 0x81, 2, 'h', 'i'};
            assertTrue(ByteBufUtil.indexOf(Unpooled.wrappedBuffer(echo), out) >= 0, "the echo of the text frame");
            out.release();
        } finally {
            channel.finishAndReleaseAll();
        }
        assertEquals(0, connections.inFlight(), "the WebSocket ended with the connection");
    }

    /** A stream error on a WebSocket's stream (here a window grown past 2^31-1) resets it, and the WebSocket ends with it. */
    @Test
    void aWebSocketWhoseStreamIsResetForAStreamErrorEnds() {
        Connections connections = new Connections(100, RequestMetrics.OFF);
        EmbeddedChannel channel = serverWithAWebSocket(connections);
        try {
            channel.writeInbound(clientFrames((writer, ctx) -> writer.writeWindowUpdate(ctx, 1, Integer.MAX_VALUE, ctx.newPromise())));
            channel.runPendingTasks();
            assertTrue(channel.isActive(), "a stream error leaves the connection open");
            assertEquals(0, connections.inFlight(), "the WebSocket ended with its stream");
        } finally {
            channel.finishAndReleaseAll();
        }
    }

    /** A client SETTINGS frame, then HEADERS on stream 1: CONNECT with :protocol websocket, and a masked text frame. */
    private static ByteBuf webSocketConnect() {
        Http2Headers headers = new DefaultHttp2Headers().method("CONNECT").scheme("http").path("/ws").authority("fuzz")
                .add(Http2Headers.PseudoHeaderName.PROTOCOL.value(), "websocket").add("sec-websocket-version", "13");
        byte[] text = {(byte) 0x81, (byte) 0x82, 1, 2, 3, 4, 'h' ^ 1, 'i' ^ 2}; // "hi", masked
        return clientFrames((writer, ctx) -> {
            writer.writeSettings(ctx, new Http2Settings(), ctx.newPromise());
            writer.writeHeaders(ctx, 1, headers, 0, false, ctx.newPromise());
            writer.writeData(ctx, 1, Unpooled.wrappedBuffer(text), 0, false, ctx.newPromise());
        });
    }

    /** The bytes of the frames {@code frames} writes, as a client would send them. */
    private static ByteBuf clientFrames(BiConsumer<DefaultHttp2FrameWriter, ChannelHandlerContext> frames) {
        EmbeddedChannel sink = new EmbeddedChannel(new ChannelInboundHandlerAdapter());
        ChannelHandlerContext ctx = sink.pipeline().firstContext();
        frames.accept(new DefaultHttp2FrameWriter(), ctx);
        ctx.flush();
        ByteBuf out = Unpooled.buffer();
        for (Object msg; (msg = sink.readOutbound()) != null; ) {
            out.writeBytes((ByteBuf) msg);
            ((ByteBuf) msg).release();
        }
        sink.finishAndReleaseAll();
        return out;
    }

    /** A server connection on which the client opened a WebSocket (stream 1), counted in flight. */
    private static EmbeddedChannel serverWithAWebSocket(Connections connections) {
        EmbeddedChannel channel = new EmbeddedChannel();
        Http2Setup.configure(channel.pipeline(), new RequestCore(SETTINGS, connections, new AnsweringApplication()), new EchoingWebSockets());
        channel.writeInbound(Http2CodecUtil.connectionPrefaceBuf());
        channel.writeInbound(webSocketConnect());
        channel.runPendingTasks();
        assertEquals(1, connections.inFlight(), "the WebSocket is in flight");
        return channel;
    }

    /** The server's bytes parse as frames: a 9-byte header and exactly its length of payload, to the end. */
    private static void assertWholeFrames(EmbeddedChannel channel) {
        ByteBuf out = Unpooled.buffer();
        Object msg;
        while ((msg = channel.readOutbound()) != null) {
            if (msg instanceof ByteBuf buf) out.writeBytes(buf);
            ReferenceCountUtil.release(msg);
        }
        try {
            while (out.isReadable()) {
                assertTrue(out.readableBytes() >= 9, "a partial frame header");
                int length = out.readUnsignedMedium();
                out.skipBytes(6);
                assertTrue(out.readableBytes() >= length, "a partial frame payload");
                out.skipBytes(length);
            }
        } finally {
            out.release();
        }
    }
}
