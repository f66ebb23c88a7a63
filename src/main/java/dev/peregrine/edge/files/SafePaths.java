package dev.peregrine.edge.files;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.http.HttpDate;
import dev.peregrine.http.PercentDecoder;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Maps the path of a request to a file under one root, refusing whatever could reach outside it or
 * show what is hidden: the path is percent-decoded once, and refused when it has an encoded slash or
 * backslash, a NUL, a backslash, an empty segment, or any segment that starts with a dot (which covers
 * {@code .} and {@code ..}, dotfiles and dot-directories). The file found must then have its real path
 * (symlinks resolved) under the root's, itself resolved once at start, again without a dot-named part.
 */
final class SafePaths {
    private final Path root;
    /** Files found recently, by request path: bounded, least recently used first out. */
    private final Map<String, File> resolved = new LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, File> eldest) {
            if (size() <= RESOLVED_ENTRIES) return false;
            retire(eldest.getValue());
            return true;
        }
    };
    private static final int RESOLVED_ENTRIES = 1024;
    /**
     * Files up to this size are answered from memory: their bytes are read once and kept with the file
     * found, so that a request costs one stat instead of a stat, an open, a read and a close.
     */
    static final int SMALL_FILE = 16 * 1024;
    /** The bytes of small files kept at once, per mount and worker. */
    private static final long SMALL_FILE_BUDGET = 4L << 20;
    /** Bytes kept by the files in {@link #resolved}; guarded by it. */
    private long keptBytes;

    /** What a request path leads to. */
    sealed interface Found permits File, Directory, Missing {}

    /**
     * A regular file that may be served; {@code path} is its real path, {@code identity} its device and
     * inode, so that a path later leading to another file is not taken for it. What the responses need of
     * it (its tag, its date, a small file's bytes) is made once and kept as long as the stat that
     * revalidates it each time ({@link #find}) shows the file unchanged.
     */
    static final class File implements Found {
        private final Path path;
        private final long size;
        private final long modifiedMicros;
        private final Object identity;
        private final String etag;
        private String lastModified;
        /** The bytes of a file of at most {@link #SMALL_FILE}, once read; null before, or when not kept. */
        private volatile byte[] bytes;
        /** Among the files found ({@link #resolved}), whose bytes may be kept; guarded by it. */
        private boolean listed;

        File(Path path, long size, long modifiedMicros, Object identity) {
            this.path = path;
            this.size = size;
            this.modifiedMicros = modifiedMicros;
            this.identity = identity;
            this.etag = "\"" + Long.toHexString(size) + "-" + Long.toHexString(modifiedMicros) + "\"";
        }

        Path path() { return path; }
        long size() { return size; }
        long modifiedMicros() { return modifiedMicros; }
        Object identity() { return identity; }

        /** A strong entity tag of size and modification time: it changes whenever the content may have. */
        String etag() {
            return etag;
        }

        /** The tag of a precompressed sibling, marked with its coding so that no two representations share one. */
        String etag(String coding) {
            return "\"" + Long.toHexString(size) + "-" + Long.toHexString(modifiedMicros) + "-" + coding + "\"";
        }

        long modifiedSeconds() {
            return Math.floorDiv(modifiedMicros, 1_000_000L);
        }

        /** Last-Modified's value; formatting a date costs more than the rest of a small file's answer. */
        String lastModified() {
            String value = lastModified;
            if (value == null) lastModified = value = HttpDate.format(modifiedSeconds());
            return value;
        }
    }

    /** A directory asked without its trailing slash. */
    record Directory() implements Found {}

    /** Nothing to serve: 404. */
    record Missing() implements Found {}

    private static final Missing MISSING = new Missing();

    /** {@code root}: a real path (no symlinks left in it). */
    SafePaths(Path root) {
        this.root = root;
    }

    /**
     * The request path after the mount's prefix, data[start, start+length): empty, or starting with '/'.
     * A file found before is reused when one stat of its real path still shows the same size and
     * modification time, instead of resolving the path again (a stat per component, and the checks).
     */
    Found find(byte[] data, int start, int length) {
        String key = new String(data, start, length, StandardCharsets.ISO_8859_1);
        File known;
        synchronized (resolved) {
            known = resolved.get(key);
        }
        if (known != null) {
            File now = unchanged(known);
            if (now != null) return now;
        }
        Found found = resolve(data, start, length);
        synchronized (resolved) {
            File replaced;
            if (found instanceof File file) {
                file.listed = true;
                replaced = resolved.put(key, file);
            } else {
                replaced = resolved.remove(key);
            }
            if (replaced != null && replaced != found) retire(replaced);
        }
        return found;
    }

    /**
     * The bytes of {@code file}, a file of at most {@link #SMALL_FILE} found by {@link #find}: read once,
     * then kept while there is room in the budget. Null when the file no longer has the size it was
     * found with (it is being written: the caller sends it from disk, as any file).
     */
    byte[] smallFileBytes(File file) throws IOException {
        byte[] bytes = file.bytes;
        if (bytes != null) return bytes;
        bytes = Files.readAllBytes(file.path());
        if (bytes.length != file.size()) return null;
        synchronized (resolved) {
            if (file.listed && file.bytes == null && keptBytes + bytes.length <= SMALL_FILE_BUDGET) {
                file.bytes = bytes;
                keptBytes += bytes.length;
            }
        }
        return bytes;
    }

    /** {@code file} leaves the files found: its bytes go too. Holding the lock of {@link #resolved}. */
    private void retire(File file) {
        file.listed = false;
        byte[] bytes = file.bytes;
        if (bytes != null) {
            keptBytes -= bytes.length;
            file.bytes = null;
        }
    }

    /** {@code known} when its real path still is a regular file of the same size and modification time, else null. */
    private static File unchanged(File known) {
        try {
            BasicFileAttributes attributes = Files.readAttributes(known.path(), BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (attributes.isRegularFile() && attributes.size() == known.size() && Objects.equals(attributes.fileKey(), known.identity())
                    && attributes.lastModifiedTime().to(TimeUnit.MICROSECONDS) == known.modifiedMicros()) return known;
        } catch (IOException | SecurityException e) {
            // gone: resolve again
        }
        return null;
    }

    private Found resolve(byte[] data, int start, int length) {
        if (length == 0) return new Directory();
        if (hasEncodedSeparator(data, start, length)) return MISSING;
        byte[] decoded = PercentDecoder.decode(data, start, length);
        if (decoded == null) decoded = Arrays.copyOfRange(data, start, start + length);
        String path;
        try {
            path = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(decoded)).toString();
        } catch (CharacterCodingException e) {
            return MISSING;
        }
        if (path.indexOf('\0') >= 0 || path.indexOf('\\') >= 0) return MISSING;
        String[] segments = path.split("/", -1);
        boolean slash = false;
        Path target = root;
        for (int i = 1; i < segments.length; i++) {
            String segment = segments[i];
            if (segment.isEmpty()) {
                if (i != segments.length - 1) return MISSING;
                slash = true;
            } else {
                if (segment.charAt(0) == '.') return MISSING;
                target = target.resolve(segment);
            }
        }
        try {
            File file = regularFile(target);
            if (file != null) return slash ? MISSING : file;
            if (!isDirectory(target)) return MISSING;
            if (!slash) return new Directory();
            File index = regularFile(target.resolve("index.html"));
            return index != null ? index : MISSING;
        } catch (IOException | SecurityException e) {
            return MISSING;
        }
    }

    /** The file at {@code path} when it is a regular file whose real path is inside the root, else null. */
    File regularFile(Path path) throws IOException {
        Path real = inside(path);
        if (real == null) return null;
        BasicFileAttributes attributes = Files.readAttributes(real, BasicFileAttributes.class);
        if (!attributes.isRegularFile()) return null;
        return new File(real, attributes.size(), attributes.lastModifiedTime().to(TimeUnit.MICROSECONDS), attributes.fileKey());
    }

    /**
     * The precompressed siblings of {@code file} (FILE.br, FILE.zst, FILE.gz), checked as any file is
     * (inside the root, no dot-named part, regular); one older than the file is stale and left out.
     */
    Map<ContentCoding, File> precompressed(File file) {
        Map<ContentCoding, File> siblings = new EnumMap<>(ContentCoding.class);
        String name = file.path().getFileName().toString();
        for (ContentCoding coding : ContentCoding.values()) {
            try {
                File sibling = regularFile(file.path().resolveSibling(name + coding.fileSuffix()));
                if (sibling != null && sibling.modifiedMicros() >= file.modifiedMicros()) siblings.put(coding, sibling);
            } catch (IOException | SecurityException e) {
                // unreadable: as if absent
            }
        }
        return siblings;
    }

    private boolean isDirectory(Path path) throws IOException {
        Path real = inside(path);
        return real != null && Files.isDirectory(real);
    }

    /** The real path of {@code path} when it exists and lies under the root without a dot-named part, else null. */
    private Path inside(Path path) throws IOException {
        if (!Files.exists(path)) return null;
        Path real = path.toRealPath();
        if (!real.startsWith(root)) return null;
        for (Path part : root.relativize(real)) {
            if (part.toString().startsWith(".")) return null;
        }
        return real;
    }

    private static boolean hasEncodedSeparator(byte[] data, int start, int length) {
        for (int i = start; i + 2 < start + length; i++) {
            if (data[i] != '%') continue;
            byte hi = data[i + 1], lo = (byte) (data[i + 2] | 0x20);
            if ((hi == '2' && lo == 'f') || (hi == '5' && lo == 'c')) return true;
        }
        return false;
    }
}
