package dev.peregrine.wsgi;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A request body without Content-Length that outgrew what a WSGI request holds in memory, kept in a
 * temporary file until it ends, as nginx's {@code client_body_temp_path} does in front of gunicorn.
 * Only then is the application called, with the body's length in CONTENT_LENGTH: Django reads no more
 * than that many bytes, so a chunked upload streamed to it would arrive empty.
 * <p>
 * The file is unlinked as soon as it is open: it takes no name in the directory, and a worker that
 * dies leaves nothing behind. Writes happen on the connection's I/O thread, like nginx's; they go to
 * the page cache and are bounded by --max-body.
 */
final class SpooledBody implements AutoCloseable {
    private final FileChannel file;
    private long written;
    private long readPosition;

    private SpooledBody(FileChannel file) {
        this.file = file;
    }

    static SpooledBody create() throws IOException {
        Path path = Files.createTempFile(temporaryDirectory(), "peregrine-body-", ".tmp");
        try {
            FileChannel file = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE);
            return new SpooledBody(file);
        } finally {
            Files.deleteIfExists(path);
        }
    }

    /** $TMPDIR, as the tools a Python user knows honour it; the JVM's java.io.tmpdir does not look at it. */
    private static Path temporaryDirectory() {
        String configured = System.getenv("TMPDIR");
        return Path.of(configured != null && !configured.isEmpty() ? configured : System.getProperty("java.io.tmpdir"));
    }

    /** Appends the piece's readable bytes and releases it. */
    void append(ByteBuf piece) throws IOException {
        try {
            int length = piece.readableBytes();
            int done = 0;
            while (done < length) done += piece.getBytes(piece.readerIndex() + done, file, written + done, length - done);
            written += length;
        } finally {
            piece.release();
        }
    }

    long length() { return written; }

    /** Up to {@code max} bytes from where the last read stopped (all that is left when max is negative). */
    ByteBuf read(int max, ByteBufAllocator alloc) throws IOException {
        long left = written - readPosition;
        int want = (int) Math.min(max < 0 ? Integer.MAX_VALUE - 8 : max, left);
        ByteBuf out = alloc.heapBuffer(want);
        while (out.writerIndex() < want) {
            int got = out.writeBytes(file, readPosition, want - out.writerIndex());
            if (got < 0) break;
            readPosition += got;
        }
        return out;
    }

    @Override
    public void close() {
        try {
            file.close();
        } catch (IOException ignored) {
            // Nothing was lost: the file was already unlinked, and the descriptor goes with the process at worst.
        }
    }
}
