package dev.peregrine.http2;

import dev.peregrine.http.RequestCore;
import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.ops.metrics.RequestMetrics;
import dev.peregrine.http.Connections;
import dev.peregrine.testing.AnsweringApplication;
import dev.peregrine.testing.FuzzPieces;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.http2.Http2CodecUtil;
import io.netty.util.ReferenceCountUtil;


import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Fuzzes what an HTTP/2 client talks to: the server's setup of Netty's frame codec (its limits and
 * abuse checks) and {@link Http2Connection}, behind a valid preface, with an application that reads
 * every body and answers every request. Whatever the frames, nothing may throw out of the pipeline, the
 * server's output must be a sequence of whole frames, and every request the application saw must end
 * (answered, reset or cut by the connection's close): no stream may be left hanging.
 */
class Http2FuzzTest {
    private static final HttpSettings SETTINGS = AnsweringApplication.settings("app:app", "--max-body", "4096", "--max-header-size", "2048", "--graceful-timeout", "0");


    @FuzzTest(maxDuration = "30s")
    void frames(FuzzedDataProvider data) {
        int pieces = data.consumeInt(1, 8);
        byte[] input = data.consumeRemainingAsBytes();
        Connections connections = new Connections(100, RequestMetrics.OFF);
        EmbeddedChannel channel = new EmbeddedChannel();
        Http2Setup.configure(channel.pipeline(), new RequestCore(SETTINGS, connections, new AnsweringApplication()));
        try {
            ByteBuf preface = Http2CodecUtil.connectionPrefaceBuf();
            channel.writeInbound(preface);
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
