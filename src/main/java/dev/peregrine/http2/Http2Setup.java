package dev.peregrine.http2;

import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.RequestCore;
import dev.peregrine.websocket.WebSocketApplication;
import io.netty.channel.ChannelPipeline;
import io.netty.handler.codec.http2.Http2FrameCodec;
import io.netty.handler.codec.http2.Http2Settings;

/**
 * The HTTP/2 side of a connection: Netty's frame codec ({@link Http2ServerCodec}: framing, HPACK, stream
 * states, flow-control windows, and the abuse limits below), with the stream-state rules it lacks
 * ({@link StreamStateRules}), followed by {@link Http2Connection}, which maps streams to application calls.
 */
public final class Http2Setup {
    /** Streams a client may have open at once (nginx allows 128, h2o 100). */
    public static final int MAX_CONCURRENT_STREAMS = 100;
    /** Request body a stream may send ahead of the application's reading. */
    public static final int STREAM_WINDOW = 65_535;
    /**
     * Resets a client may cause in 30 s before the connection gets GOAWAY ENHANCE_YOUR_CALM: the
     * rapid-reset attack (CVE-2023-44487) opens and cancels streams to make the server work for nothing.
     */
    static final int MAX_RESETS_PER_30_S = 200;
    /** CONTINUATION frames far smaller than a frame may carry, in a row, before the connection is ended (the 2024 CONTINUATION flood). */
    static final int MAX_SMALL_CONTINUATIONS = 16;

    private Http2Setup() {}

    /** @param webSockets where WebSocket handshakes (RFC 8441) go; null when they are refused */
    public static void configure(ChannelPipeline pipeline, RequestCore core, WebSocketApplication webSockets) {
        boolean servesWebSockets = webSockets != null && core.settings().webSocket() != null;
        pipeline.addLast(codec(core.settings(), servesWebSockets), new Http2Connection(core, webSockets));
    }

    static Http2FrameCodec codec(HttpSettings settings, boolean servesWebSockets) {
        Http2Settings initial = Http2Settings.defaultSettings()
                .maxConcurrentStreams(MAX_CONCURRENT_STREAMS)
                .initialWindowSize(STREAM_WINDOW)
                .maxHeaderListSize(settings.maxHeadSize());
        // SETTINGS_ENABLE_CONNECT_PROTOCOL tells clients they may open WebSockets on this connection.
        if (servesWebSockets) initial.connectProtocolEnabled(true);
        StreamStateRules rules = new StreamStateRules();
        Http2FrameCodec codec = new Http2ServerCodec.Builder()
                .initialSettings(initial)
                .validateHeaders(true)
                .gracefulShutdownTimeoutMillis(settings.gracefulTimeoutMillis())
                .decoderEnforceMaxRstFramesPerWindow(MAX_RESETS_PER_30_S, 30)
                // Resets the server sends because of the client (MadeYouReset, 2025) count as well.
                .encoderEnforceMaxRstFramesPerWindow(MAX_RESETS_PER_30_S, 30)
                .decoderEnforceMaxSmallContinuationFrames(MAX_SMALL_CONTINUATIONS)
                .frameLogger(rules)
                .build();
        rules.attach(codec.connection());
        return codec;
    }
}
