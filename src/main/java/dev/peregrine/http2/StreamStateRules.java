package dev.peregrine.http2;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.handler.codec.http2.Http2Connection;
import io.netty.handler.codec.http2.Http2ConnectionAdapter;
import io.netty.handler.codec.http2.Http2Error;
import io.netty.handler.codec.http2.Http2Exception;
import io.netty.handler.codec.http2.Http2FrameLogger;
import io.netty.handler.codec.http2.Http2Headers;
import io.netty.handler.codec.http2.Http2Stream;
import io.netty.handler.logging.LogLevel;

/**
 * The stream-state rules of RFC 9113 5.1 and 5.1.1 that Netty's decoder does not make, for the
 * client's streams of one connection:
 * <ul>
 *   <li>HEADERS on a half-closed (remote) stream is a stream error STREAM_CLOSED (Netty: PROTOCOL_ERROR);
 *   <li>HEADERS or DATA on a stream that ended normally (END_STREAM both ways) is a connection error
 *       STREAM_CLOSED (Netty: a stream error, as if the stream had been reset);
 *   <li>HEADERS opening a stream with an id lower than one the client already opened is a connection
 *       error PROTOCOL_ERROR (Netty: a stream error STREAM_CLOSED);
 *   <li>WINDOW_UPDATE on a stream the client reset is a stream error STREAM_CLOSED (Netty: ignored).
 * </ul>
 * Netty removes a stream the moment it closes, so it cannot tell these cases apart from frames that
 * must be borne: frames on a stream the server reset (DATA the client sent before it saw the reset),
 * or on one the client reset. This class remembers how the last {@value #REMEMBERED} streams closed
 * and which ids the client skipped; a stream it has forgotten gets Netty's lenient answer.
 *
 * <p>It is a frame logger because that is the only hook Netty's frame codec offers between its frame
 * reader and the decoder's state checks: the reader calls it for every frame, before the decoder acts
 * on it, and an {@link Http2Exception} thrown from here is handled exactly like one of the decoder's own
 * (a stream error resets the stream, a connection error sends GOAWAY and closes). Frames are still
 * logged when Netty's frame logger category is set to TRACE.
 */
final class StreamStateRules extends Http2FrameLogger {
    /** Closed streams remembered: more than can be open at once, so that a burst of closes forgets none in flight. */
    static final int REMEMBERED = 2 * Http2Setup.MAX_CONCURRENT_STREAMS;
    /** Ranges of skipped ids remembered; a client that skips more only loses the more precise error code. */
    private static final int GAPS = 16;

    private Http2Connection connection;
    private Http2Connection.PropertyKey resetByClient;
    /** The highest stream id the client sent HEADERS for. */
    private int highestOpened = -1;
    /** Pairs (first, last) of ids the client skipped: they were never opened. Allocated on the first skip. */
    private int[] gaps;
    private int gapCount;
    /** A ring of closed streams: the id of one that ended normally, minus the id of one the client reset. Allocated on the first close. */
    private int[] closed;
    private int closedNext;

    StreamStateRules() {
        super(LogLevel.TRACE);
    }

    /** Follows the streams of the codec's connection; called once the codec is built. */
    void attach(Http2Connection connection) {
        this.connection = connection;
        this.resetByClient = connection.newKey();
        connection.addListener(new Http2ConnectionAdapter() {
            @Override
            public void onStreamClosed(Http2Stream stream) {
                // A stream the server reset is not remembered: frames on it are the client's in-flight ones, to be borne.
                if (connection.remote().isValidStreamId(stream.id()) && !stream.isResetSent()) {
                    remember(stream.getProperty(resetByClient) != null ? -stream.id() : stream.id());
                }
            }
        });
    }

    @Override
    public void logHeaders(Direction direction, ChannelHandlerContext ctx, int streamId, Http2Headers headers, int padding, boolean endStream) {
        super.logHeaders(direction, ctx, streamId, headers, padding, endStream);
        if (direction == Direction.INBOUND) checkHeaders(streamId);
    }

    @Override
    public void logHeaders(Direction direction, ChannelHandlerContext ctx, int streamId, Http2Headers headers, int streamDependency,
                           short weight, boolean exclusive, int padding, boolean endStream) {
        super.logHeaders(direction, ctx, streamId, headers, streamDependency, weight, exclusive, padding, endStream);
        if (direction == Direction.INBOUND) checkHeaders(streamId);
    }

    @Override
    public void logData(Direction direction, ChannelHandlerContext ctx, int streamId, ByteBuf data, int padding, boolean endStream) {
        super.logData(direction, ctx, streamId, data, padding, endStream);
        // Only a connection error: a stream error thrown before the decoder would skip its connection flow-control accounting.
        if (direction == Direction.INBOUND && closedAs(streamId) == Closed.ENDED) {
            throw raise(Http2Exception.connectionError(Http2Error.STREAM_CLOSED, "DATA on stream %d, which had ended", streamId));
        }
    }

    @Override
    public void logWindowsUpdate(Direction direction, ChannelHandlerContext ctx, int streamId, int windowSizeIncrement) {
        super.logWindowsUpdate(direction, ctx, streamId, windowSizeIncrement);
        if (direction == Direction.INBOUND && streamId != 0 && closedAs(streamId) == Closed.RESET_BY_CLIENT) {
            throw raise(Http2Exception.streamError(streamId, Http2Error.STREAM_CLOSED, "WINDOW_UPDATE on stream %d after its RST_STREAM", streamId));
        }
    }

    @Override
    public void logRstStream(Direction direction, ChannelHandlerContext ctx, int streamId, long errorCode) {
        super.logRstStream(direction, ctx, streamId, errorCode);
        if (direction == Direction.INBOUND) {
            Http2Stream stream = connection.stream(streamId);
            if (stream != null) stream.setProperty(resetByClient, Boolean.TRUE);
        }
    }

    private void checkHeaders(int streamId) {
        if (!connection.remote().isValidStreamId(streamId)) return; // the decoder answers PROTOCOL_ERROR
        Http2Stream stream = connection.stream(streamId);
        if (stream != null) {
            // Trailers end an open stream; after the client's END_STREAM nothing more may come (a reset stream's frames are ignored).
            if (stream.state() == Http2Stream.State.HALF_CLOSED_REMOTE && !stream.isResetSent()) {
                throw raise(Http2Exception.streamError(streamId, Http2Error.STREAM_CLOSED, "HEADERS on stream %d after its END_STREAM", streamId));
            }
            return;
        }
        if (streamId > highestOpened) {
            if (streamId > highestOpened + 2) skipped(highestOpened + 2, streamId - 2);
            highestOpened = streamId;
            return;
        }
        switch (closedAs(streamId)) {
            case ENDED -> throw raise(Http2Exception.connectionError(Http2Error.STREAM_CLOSED, "HEADERS on stream %d, which had ended", streamId));
            case NEVER_OPENED -> throw raise(Http2Exception.connectionError(Http2Error.PROTOCOL_ERROR,
                    "HEADERS opening stream %d after stream %d: stream ids must increase", streamId, highestOpened));
            default -> { } // reset, or forgotten: the decoder's stream error STREAM_CLOSED
        }
    }

    private enum Closed { ENDED, RESET_BY_CLIENT, NEVER_OPENED, UNKNOWN }

    /** How a client stream the connection no longer has came to be closed. */
    private Closed closedAs(int streamId) {
        if (!connection.remote().isValidStreamId(streamId) || streamId > highestOpened || connection.stream(streamId) != null) return Closed.UNKNOWN;
        // Streams beyond the last one a GOAWAY let through are ignored by the decoder.
        if (connection.goAwaySent() && streamId > connection.remote().lastStreamKnownByPeer()) return Closed.UNKNOWN;
        if (closed != null) {
            // A scan: only frames on streams that are gone get here, and the ring is small.
            for (int entry : closed) {
                if (entry == streamId) return Closed.ENDED;
                if (entry == -streamId) return Closed.RESET_BY_CLIENT;
            }
        }
        for (int i = 0; i < gapCount; i++) {
            if (streamId >= gaps[2 * i] && streamId <= gaps[2 * i + 1]) return Closed.NEVER_OPENED;
        }
        return Closed.UNKNOWN;
    }

    private void remember(int entry) {
        if (closed == null) closed = new int[REMEMBERED];
        closed[closedNext] = entry;
        closedNext = (closedNext + 1) % REMEMBERED;
    }

    private void skipped(int first, int last) {
        if (gaps == null) gaps = new int[2 * GAPS];
        if (gapCount == GAPS) {
            System.arraycopy(gaps, 2, gaps, 0, 2 * (GAPS - 1)); // the oldest is forgotten
            gapCount--;
        }
        gaps[2 * gapCount] = first;
        gaps[2 * gapCount + 1] = last;
        gapCount++;
    }

    /**
     * Throws a checked {@link Http2Exception} through the logger's methods, which declare none: the frame
     * reader and the codec catch it by its type, as they do the decoder's.
     */
    @SuppressWarnings("unchecked")
    private static <T extends Throwable> RuntimeException raise(Throwable exception) throws T {
        throw (T) exception;
    }
}
