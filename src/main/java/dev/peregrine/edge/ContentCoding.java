package dev.peregrine.edge;

/**
 * The content codings the server produces, in its order of preference when a client weighs several
 * equally (RFC 9110 §12.5.3): br compresses text best, zstd is close and faster, gzip is what every
 * client takes.
 */
public enum ContentCoding {
    BR("br", ".br"),
    ZSTD("zstd", ".zst"),
    GZIP("gzip", ".gz");

    private final String token;
    private final String fileSuffix;

    ContentCoding(String token, String fileSuffix) {
        this.token = token;
        this.fileSuffix = fileSuffix;
    }

    /** The token of Content-Encoding and Accept-Encoding. */
    public String token() {
        return token;
    }

    /** The suffix of a precompressed sibling file: {@code app.js.br}. */
    public String fileSuffix() {
        return fileSuffix;
    }
}
