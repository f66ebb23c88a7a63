package dev.peregrine.websocket;

import com.code_intelligence.jazzer.api.FuzzedDataProvider;
import com.code_intelligence.jazzer.junit.FuzzTest;
import dev.peregrine.testing.FuzzPieces;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.embedded.EmbeddedChannel;
import io.netty.handler.codec.CodecException;
import io.netty.handler.codec.http.websocketx.WebSocketFrame;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketExtensionData;
import io.netty.handler.codec.http.websocketx.extensions.WebSocketServerExtension;
import io.netty.handler.codec.http.websocketx.extensions.compression.PerMessageDeflateServerExtensionHandshaker;
import io.netty.util.ReferenceCountUtil;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Fuzzes the frame chain an accepted WebSocket reads with ({@link WebSocketConnection#addFrameCodec}:
 * Netty's decoder, the inflater when permessage-deflate is on, UTF-8 checks, reassembly). The code is
 * Netty's, the configuration and the order are ours, and this is what a hostile peer talks to. Each
 * input must only ever produce whole messages or a codec error (never another exception), and the
 * same bytes fed in pieces must produce the same messages and the same verdict.
 */
class WebSocketFuzzTest {
    private static final int MAX_MESSAGE = 64 * 1024;

    @FuzzTest(maxDuration = "30s")
    void frames(FuzzedDataProvider data) {
        boolean compress = data.consumeBoolean();
        int pieces = data.consumeInt(1, 16);
        byte[] input = data.consumeRemainingAsBytes();

        Result whole = feed(compress, List.of(input));
        Result split = feed(compress, FuzzPieces.split(input, pieces));
        assertEquals(whole.failure, split.failure, "fed at once and in pieces, the same bytes must be judged the same");
        if (whole.failure == null) assertEquals(whole.messages, split.messages);
        for (String message : whole.messages) assertTrue(message.length() <= 2 * MAX_MESSAGE + 32, "message past the limit");
    }

    private record Result(List<String> messages, String failure) {}

    private static Result feed(boolean compress, List<byte[]> pieces) {
        List<String> messages = new ArrayList<>();
        String[] failure = {null};
        EmbeddedChannel channel = new EmbeddedChannel();
        WebSocketConnection.addFrameCodec(channel.pipeline(), MAX_MESSAGE, compress ? deflate() : null);
        channel.pipeline().addLast(new ChannelInboundHandlerAdapter() {
            @Override
            public void channelRead(ChannelHandlerContext ctx, Object msg) {
                try {
                    if (msg instanceof WebSocketFrame frame) {
                        messages.add(frame.getClass().getSimpleName() + ":" + ByteBufUtil.hexDump(frame.content()));
                    }
                } finally {
                    ReferenceCountUtil.release(msg);
                }
            }

            @Override
            public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
                // Netty's codecs report bad input as CodecExceptions (corrupt frame, too long, bad UTF-8, inflate errors).
                assertTrue(cause instanceof CodecException, () -> "not a codec error: " + cause);
                if (failure[0] == null) failure[0] = "failed";
            }
        });
        try {
            for (byte[] piece : pieces) {
                if (!channel.isActive()) break;
                channel.writeInbound(Unpooled.wrappedBuffer(piece));
            }
        } finally {
            channel.finishAndReleaseAll();
        }
        return new Result(messages, failure[0]);
    }

    private static WebSocketServerExtension deflate() {
        return new PerMessageDeflateServerExtensionHandshaker(6, false, 15, true, false, MAX_MESSAGE)
                .handshakeExtension(new WebSocketExtensionData("permessage-deflate", Map.of()));
    }
}
