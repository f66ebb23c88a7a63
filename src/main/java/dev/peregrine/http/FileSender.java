package dev.peregrine.http;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.io.IOException;

/**
 * How a file body goes out on any transport: read in chunks into pooled direct buffers, each sent
 * only while the exchange is writable, so that a slow client holds one chunk or so and never the
 * file. Used where the kernel cannot copy the file to the socket itself (TLS, HTTP/2 streams, QUIC).
 *
 * <p>A file that ends before the bytes announced (truncated while it is sent) aborts the exchange:
 * the client sees a response cut short, never bytes of another file in its place.
 */
public final class FileSender implements Runnable {
    static final int CHUNK = 64 * 1024;

    private final HttpExchange exchange;
    private final FileBody body;
    private ResponseHead head;
    private int part;
    /** Bytes of the current part already sent. */
    private long done;

    private FileSender(HttpExchange exchange, ResponseHead head, FileBody body) {
        this.exchange = exchange;
        this.head = head;
        this.body = body;
    }

    /** Starts sending; the work happens on the connection's I/O thread. Takes ownership of body. */
    public static void send(HttpExchange exchange, ResponseHead head, FileBody body) {
        exchange.whenWritable(new FileSender(exchange, head, body));
    }

    /** Sends while the exchange takes more, then waits to be called again; on the I/O thread. */
    @Override
    public void run() {
        try {
            while (true) {
                if (exchange.disconnected()) {
                    body.close();
                    return;
                }
                while (part < body.parts().size() && done == body.parts().get(part).length()) {
                    part++;
                    done = 0;
                }
                if (part == body.parts().size()) {
                    body.close();
                    exchange.send(head, null, true);
                    return;
                }
                if (!exchange.writable()) {
                    exchange.whenWritable(this);
                    return;
                }
                ByteBuf chunk = next(body.parts().get(part));
                if (chunk == null) {
                    body.close();
                    exchange.abort();
                    return;
                }
                ResponseHead first = head;
                head = null;
                exchange.send(first, chunk, false);
            }
        } catch (IOException | RuntimeException e) {
            body.close();
            exchange.abort();
        }
    }

    /** The next piece of {@code current}, or null when the file ended before it. */
    private ByteBuf next(FileBody.Part current) throws IOException {
        long left = current.length() - done;
        return switch (current) {
            case FileBody.Bytes bytes -> {
                ByteBuf buf = ByteBufAllocator.DEFAULT.directBuffer((int) left);
                buf.writeBytes(bytes.data(), (int) done, (int) left);
                done += left;
                yield buf;
            }
            case FileBody.Region region -> {
                int size = (int) Math.min(CHUNK, left);
                ByteBuf buf = ByteBufAllocator.DEFAULT.directBuffer(size);
                int read = buf.writeBytes(body.file(), region.offset() + done, size);
                if (read <= 0) {
                    buf.release();
                    yield null;
                }
                done += read;
                yield buf;
            }
        };
    }
}
