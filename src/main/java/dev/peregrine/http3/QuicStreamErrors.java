package dev.peregrine.http3;

import io.netty.incubator.codec.quic.QuicStreamChannel;
import org.jboss.logging.Logger;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;

/**
 * RESET_STREAM and STOP_SENDING with a 62-bit application error code. Netty's QUIC (0.0.75) takes the
 * code as an {@code int} and sign-extends it, but WebTransport's codes start at 0x52e4a40fa8db; quiche
 * itself takes 62 bits, so its shutdown is called by reflection with the whole code, and Netty's own
 * shutdown follows to bring the channel's state along (quiche answers that second one with "done", which
 * keeps the first code). If a later Netty moves these internals, the stream is reset with
 * H3_REQUEST_CANCELLED instead: it still ends, without the application's code.
 *
 * <p>The same internals answer whether the client stopped a stream (STOP_SENDING), which Netty reports
 * only by failing writes that are queued on it when it arrives ({@link #stopped}).
 */
final class QuicStreamErrors {
    private static final Logger LOG = Logger.getLogger("peregrine");
    /** H3_REQUEST_CANCELLED (RFC 9114 8.1): what is sent when the code cannot be. */
    static final int FALLBACK = 0x10c;

    private static final MethodHandle CONNECTION;
    private static final MethodHandle ADDRESS;
    private static final MethodHandle SHUTDOWN;
    private static final MethodHandle CAPACITY;
    private static final int READ, WRITE;

    static {
        MethodHandle connection = null, address = null, shutdown = null, capacity = null;
        int read = 0, write = 0;
        try {
            Class<?> channelClass = Class.forName("io.netty.incubator.codec.quic.QuicheQuicChannel");
            Class<?> connectionClass = Class.forName("io.netty.incubator.codec.quic.QuicheQuicConnection");
            Class<?> quiche = Class.forName("io.netty.incubator.codec.quic.Quiche");
            MethodHandles.Lookup channels = MethodHandles.privateLookupIn(channelClass, MethodHandles.lookup());
            connection = channels.findGetter(channelClass, "connection", connectionClass);
            address = channels.findStatic(channelClass, "connectionAddressChecked", MethodType.methodType(long.class, connectionClass));
            capacity = channels.findVirtual(channelClass, "streamCapacity", MethodType.methodType(long.class, long.class));
            MethodHandles.Lookup natives = MethodHandles.privateLookupIn(quiche, MethodHandles.lookup());
            shutdown = natives.findStatic(quiche, "quiche_conn_stream_shutdown",
                    MethodType.methodType(int.class, long.class, long.class, int.class, long.class));
            Field readField = quiche.getDeclaredField("QUICHE_SHUTDOWN_READ");
            Field writeField = quiche.getDeclaredField("QUICHE_SHUTDOWN_WRITE");
            readField.setAccessible(true);
            writeField.setAccessible(true);
            read = readField.getInt(null);
            write = writeField.getInt(null);
        } catch (ReflectiveOperationException | RuntimeException e) {
            LOG.debugf("QUIC stream error codes past 31 bits cannot be sent: %s", e);
            connection = null;
        }
        CONNECTION = connection;
        ADDRESS = address;
        SHUTDOWN = shutdown;
        CAPACITY = capacity;
        READ = read;
        WRITE = write;
    }

    private QuicStreamErrors() {}

    /** RESET_STREAM with {@code code}; on the channel's event loop. */
    static void reset(QuicStreamChannel channel, long code) {
        channel.shutdownOutput(shutdown(channel, WRITE, code) ? 0 : FALLBACK);
    }

    /** STOP_SENDING with {@code code}; on the channel's event loop. */
    static void stopSending(QuicStreamChannel channel, long code) {
        channel.shutdownInput(shutdown(channel, READ, code) ? 0 : FALLBACK);
    }

    /**
     * Whether the stream takes no more writes from us although Netty did not say so: the client stopped it
     * (STOP_SENDING), or quiche has already let it go. quiche's stream capacity is then an error rather
     * than a number of bytes. False when that cannot be asked. On the channel's event loop.
     */
    static boolean stopped(QuicStreamChannel channel) {
        if (CONNECTION == null) return false;
        try {
            return (long) CAPACITY.invoke(channel.parent(), channel.streamId()) < 0;
        } catch (Throwable e) {
            return false;
        }
    }

    private static boolean shutdown(QuicStreamChannel channel, int direction, long code) {
        if (CONNECTION == null) return false;
        try {
            long address = (long) ADDRESS.invoke(CONNECTION.invoke(channel.parent()));
            int result = (int) SHUTDOWN.invoke(address, channel.streamId(), direction, code);
            return result >= 0;
        } catch (Throwable e) {
            // The connection is gone (its address is checked first), or the internals changed.
            return false;
        }
    }
}
