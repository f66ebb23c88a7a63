package dev.peregrine.http1;

import io.netty.buffer.ByteBuf;
import io.netty.util.ByteProcessor;

import java.util.List;

import static dev.peregrine.http1.RequestHeadParser.CR;
import static dev.peregrine.http1.RequestHeadParser.HTAB;
import static dev.peregrine.http1.RequestHeadParser.LF;
import static dev.peregrine.http1.RequestHeadParser.SP;
import static dev.peregrine.http1.RequestHeadParser.isOws;
import static dev.peregrine.http1.RequestHeadParser.isTchar;

/**
 * Decodes one chunked request body (RFC 9112 section 7.1), strictly: the framing of a chunked body is where
 * request smuggling hides, so anything outside the grammar is refused rather than guessed at.
 *
 * <p>Every byte outside chunk data goes through a byte-at-a-time state machine, so the decoder never needs to
 * look ahead or hold bytes back: input split at any boundary decodes the same, and an over-long chunk-size line
 * or trailer section is refused as soon as it crosses its limit instead of being buffered. Chunk extensions and
 * trailer fields are validated and discarded.
 *
 * <p>Not thread-safe; one instance decodes one body at a time, {@link #reset()} readies it for the next.
 */
public final class ChunkedDecoder {

    private static final int MAX_SIZE_DIGITS = 16;

    // States of the chunk-size line: chunk-size [ chunk-ext ] CRLF
    private static final int SIZE = 0;
    private static final int SIZE_BWS = 1;
    private static final int EXT_BEFORE_NAME = 2;
    private static final int EXT_NAME = 3;
    private static final int EXT_AFTER_NAME = 4;
    private static final int EXT_BEFORE_VALUE = 5;
    private static final int EXT_TOKEN_VALUE = 6;
    private static final int EXT_QUOTED_VALUE = 7;
    private static final int EXT_QUOTED_ESCAPE = 8;
    private static final int EXT_AFTER_QUOTED_VALUE = 9;
    private static final int EXT_AFTER_VALUE_BWS = 10;
    private static final int SIZE_LF = 11;
    // The CRLF after chunk data.
    private static final int DATA_CR = 12;
    private static final int DATA_LF = 13;
    // The trailer section: *( field-line CRLF ) CRLF
    private static final int TRAILER_LINE_START = 14;
    private static final int TRAILER_NAME = 15;
    private static final int TRAILER_VALUE = 16;
    private static final int TRAILER_LF = 17;
    private static final int LAST_LF = 18;
    // Handled outside the byte-at-a-time machine.
    private static final int DATA = 19;
    private static final int DONE = 20;

    private final int maxLineLength;
    private final int maxTrailerBytes;
    private final FramingParser framingParser = new FramingParser();

    private int state;
    private int sizeDigits;
    private long chunkSize;
    private long remaining;
    private int lineLength;
    private int trailerBytes;

    /**
     * @param maxLineLength   limit for a chunk-size line (extensions and CRLF included) and for each trailer line
     * @param maxTrailerBytes limit for the whole trailer section, line ends included
     */
    public ChunkedDecoder(int maxLineLength, int maxTrailerBytes) {
        if (maxLineLength < 3 || maxTrailerBytes < 2) {
            throw new IllegalArgumentException("limits too small: " + maxLineLength + ", " + maxTrailerBytes);
        }
        this.maxLineLength = maxLineLength;
        this.maxTrailerBytes = maxTrailerBytes;
    }

    /**
     * Consumes as much of in as it can, adding decoded data to out as retained slices (never empty ones).
     * Returns true once the last chunk, the trailer section and the final CRLF have been consumed; from then on
     * consumes nothing, since the bytes that follow belong to the next request. Returns false when it needs more
     * input. Throws HttpParseException(400) on any framing error.
     */
    public boolean decode(ByteBuf in, List<ByteBuf> out) {
        while (state != DONE) {
            int readable = in.readableBytes();
            if (readable == 0) {
                return false;
            }
            if (state == DATA) {
                int n = (int) Math.min(remaining, readable);
                out.add(in.readRetainedSlice(n));
                remaining -= n;
                if (remaining == 0) {
                    state = DATA_CR;
                }
            } else {
                int stop = in.forEachByte(in.readerIndex(), readable, framingParser);
                if (stop < 0) {
                    in.skipBytes(readable);
                    return false;
                }
                in.readerIndex(stop + 1);
            }
        }
        return true;
    }

    /** Readies the decoder for the next body. */
    public void reset() {
        state = SIZE;
        sizeDigits = 0;
        chunkSize = 0;
        remaining = 0;
        lineLength = 0;
        trailerBytes = 0;
    }

    private static HttpParseException bad(String reason) {
        return new HttpParseException(400, reason);
    }

    private static int hexValue(byte b) {
        if (b >= '0' && b <= '9') {
            return b - '0';
        }
        if (b >= 'a' && b <= 'f') {
            return b - 'a' + 10;
        }
        if (b >= 'A' && b <= 'F') {
            return b - 'A' + 10;
        }
        return -1;
    }

    /** RFC 9110 qdtext: HTAB, SP, VCHAR except '"' and '\', obs-text. */
    private static boolean isQdtext(int c) {
        return c == HTAB || c == SP || c == 0x21 || (c >= 0x23 && c <= 0x5B) || (c >= 0x5D && c <= 0x7E) || c >= 0x80;
    }

    /** HTAB, SP, VCHAR, obs-text: what a field value, or a backslash-escaped character, may be. */
    private static boolean isFieldValueChar(int c) {
        return c == HTAB || (c >= 0x20 && c != 0x7F);
    }

    /** Returns false (stopping the scan) after a byte that hands over to chunk data or ends the body. */
    private final class FramingParser implements ByteProcessor {

        @Override
        public boolean process(byte b) {
            if (state <= SIZE_LF) {
                if (++lineLength > maxLineLength) {
                    throw bad("chunk-size line too long");
                }
            } else if (state >= TRAILER_LINE_START) {
                if (++lineLength > maxLineLength) {
                    throw bad("trailer line too long");
                }
                if (++trailerBytes > maxTrailerBytes) {
                    throw bad("trailer section too large");
                }
            }
            int c = b & 0xFF;
            switch (state) {
                case SIZE -> {
                    int digit = hexValue(b);
                    if (digit >= 0) {
                        if (++sizeDigits > MAX_SIZE_DIGITS || chunkSize > (Long.MAX_VALUE >> 4)) {
                            throw bad("chunk size too large");
                        }
                        chunkSize = (chunkSize << 4) | digit;
                    } else if (sizeDigits == 0) {
                        throw bad("invalid chunk size");
                    } else if (isOws(b)) {
                        state = SIZE_BWS;
                    } else if (b == ';') {
                        state = EXT_BEFORE_NAME;
                    } else if (b == CR) {
                        state = SIZE_LF;
                    } else {
                        throw bad("invalid chunk size");
                    }
                }
                // Whitespace after the size is only tolerated as BWS before an extension.
                case SIZE_BWS -> state = expectSemicolon(b, "whitespace after chunk size");
                case EXT_BEFORE_NAME -> {
                    if (isTchar(b)) {
                        state = EXT_NAME;
                    } else if (!isOws(b)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_NAME -> {
                    if (b == '=') {
                        state = EXT_BEFORE_VALUE;
                    } else if (b == ';') {
                        state = EXT_BEFORE_NAME;
                    } else if (b == CR) {
                        state = SIZE_LF;
                    } else if (isOws(b)) {
                        state = EXT_AFTER_NAME;
                    } else if (!isTchar(b)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_AFTER_NAME -> {
                    if (b == '=') {
                        state = EXT_BEFORE_VALUE;
                    } else if (b == ';') {
                        state = EXT_BEFORE_NAME;
                    } else if (!isOws(b)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_BEFORE_VALUE -> {
                    if (b == '"') {
                        state = EXT_QUOTED_VALUE;
                    } else if (isTchar(b)) {
                        state = EXT_TOKEN_VALUE;
                    } else if (!isOws(b)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_TOKEN_VALUE -> {
                    if (b == ';') {
                        state = EXT_BEFORE_NAME;
                    } else if (b == CR) {
                        state = SIZE_LF;
                    } else if (isOws(b)) {
                        state = EXT_AFTER_VALUE_BWS;
                    } else if (!isTchar(b)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_QUOTED_VALUE -> {
                    if (b == '"') {
                        state = EXT_AFTER_QUOTED_VALUE;
                    } else if (b == '\\') {
                        state = EXT_QUOTED_ESCAPE;
                    } else if (!isQdtext(c)) {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_QUOTED_ESCAPE -> {
                    if (!isFieldValueChar(c)) {
                        throw bad("invalid chunk extension");
                    }
                    state = EXT_QUOTED_VALUE;
                }
                case EXT_AFTER_QUOTED_VALUE -> {
                    if (b == ';') {
                        state = EXT_BEFORE_NAME;
                    } else if (b == CR) {
                        state = SIZE_LF;
                    } else if (isOws(b)) {
                        state = EXT_AFTER_VALUE_BWS;
                    } else {
                        throw bad("invalid chunk extension");
                    }
                }
                case EXT_AFTER_VALUE_BWS -> state = expectSemicolon(b, "invalid chunk extension");
                case SIZE_LF -> {
                    expectLf(b);
                    lineLength = 0;
                    if (chunkSize == 0) {
                        state = TRAILER_LINE_START;
                        return true;
                    }
                    remaining = chunkSize;
                    chunkSize = 0;
                    sizeDigits = 0;
                    state = DATA;
                    return false;
                }
                case DATA_CR -> {
                    if (b != CR) {
                        throw bad("chunk data not followed by CRLF");
                    }
                    state = DATA_LF;
                }
                case DATA_LF -> {
                    if (b != LF) {
                        throw bad("chunk data not followed by CRLF");
                    }
                    state = SIZE;
                }
                case TRAILER_LINE_START -> {
                    if (b == CR) {
                        state = LAST_LF;
                    } else if (isOws(b)) {
                        throw bad("obs-fold in trailer");
                    } else if (b == ':') {
                        throw bad("empty trailer field name");
                    } else if (isTchar(b)) {
                        state = TRAILER_NAME;
                    } else {
                        throw bad("invalid character in trailer field name");
                    }
                }
                case TRAILER_NAME -> {
                    if (b == ':') {
                        state = TRAILER_VALUE;
                    } else if (isOws(b)) {
                        throw bad("whitespace in trailer field name");
                    } else if (b == CR) {
                        throw bad("trailer line without colon");
                    } else if (!isTchar(b)) {
                        throw bad("invalid character in trailer field name");
                    }
                }
                case TRAILER_VALUE -> {
                    if (b == CR) {
                        state = TRAILER_LF;
                    } else if (!isFieldValueChar(c)) {
                        throw bad("invalid character in trailer field value");
                    }
                }
                case TRAILER_LF -> {
                    expectLf(b);
                    lineLength = 0;
                    state = TRAILER_LINE_START;
                }
                case LAST_LF -> {
                    expectLf(b);
                    state = DONE;
                    return false;
                }
                default -> throw new IllegalStateException("framing parser in state " + state);
            }
            return true;
        }

        private int expectSemicolon(byte b, String reason) {
            if (b == ';') {
                return EXT_BEFORE_NAME;
            }
            if (isOws(b)) {
                return state;
            }
            throw bad(reason);
        }

        private void expectLf(byte b) {
            if (b != LF) {
                throw bad("bare CR");
            }
        }
    }
}
