package dev.peregrine.http;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.util.List;

/**
 * A response body taken from an open file: its parts in order, each either bytes of the server's own
 * (the boundaries of a multipart/byteranges body) or a region of the file. Whoever is handed a
 * FileBody closes its file.
 */
public record FileBody(FileChannel file, List<Part> parts) {

    public sealed interface Part permits Bytes, Region {
        long length();
    }

    /** Bytes that go out as they are. */
    public record Bytes(byte[] data) implements Part {
        @Override public long length() { return data.length; }
    }

    /** {@code length} bytes of the file from {@code offset}. */
    public record Region(long offset, long length) implements Part {}

    /** The whole body is {@code length} bytes of {@code file} from {@code offset}. */
    public static FileBody region(FileChannel file, long offset, long length) {
        return new FileBody(file, List.of(new Region(offset, length)));
    }

    /** The region when the body is exactly one, else null. */
    public Region singleRegion() {
        return parts.size() == 1 && parts.getFirst() instanceof Region region ? region : null;
    }

    public long length() {
        long total = 0;
        for (Part part : parts) total += part.length();
        return total;
    }

    /** Closes the file; a failure to close a file only read from loses nothing. */
    public void close() {
        try {
            file.close();
        } catch (IOException ignored) {
            // nothing was written to it
        }
    }
}
