package dev.peregrine.edge.cache;

import dev.peregrine.edge.ContentCoding;
import dev.peregrine.http.HttpChars;
import dev.peregrine.http.HttpDate;
import dev.peregrine.http.ResponseHead;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * One stored response as the bytes of its ring record: a fixed header of six ints (the lengths of the
 * key, the variant, the head and the body; the status; unused), then the key, the variant (the request
 * values of the headers the response varies on), the head, the body. Variant and head are
 * {@code name NUL value NUL} pairs: response header values cannot hold NUL ({@link ResponseHead}
 * refuses it), request header values neither (the parsers refuse it).
 */
final class CacheEntry {
    private static final int FIXED = 24;
    /**
     * Not stored: the headers of one connection (RFC 9111 §3.1), and those every answer gets anew (Age,
     * Cache-Status, Content-Length, X-Request-ID).
     */
    private static final List<String> NOT_STORED = List.of("connection", "keep-alive", "proxy-connection", "te", "trailer",
            "transfer-encoding", "upgrade", "age", "cache-status", "content-length", "x-request-id");

    final byte[] record;
    final int status;
    private final int keyLength, varyLength, headLength, bodyLength;

    private CacheEntry(byte[] record) {
        ByteBuffer fixed = ByteBuffer.wrap(record, 0, FIXED);
        keyLength = fixed.getInt();
        varyLength = fixed.getInt();
        headLength = fixed.getInt();
        bodyLength = fixed.getInt();
        status = fixed.getInt();
        this.record = record;
    }

    /** Null when the bytes are not a whole record (they always are, unless the ring or a writer is broken). */
    static CacheEntry parse(byte[] record) {
        if (record.length < FIXED) return null;
        CacheEntry entry = new CacheEntry(record);
        long total = (long) FIXED + entry.keyLength + entry.varyLength + entry.headLength + entry.bodyLength;
        return entry.keyLength < 0 || entry.varyLength < 0 || entry.headLength < 0 || entry.bodyLength < 0 || total != record.length
                ? null : entry;
    }

    /** The record of a response to {@code request}: {@code varyNames} are the lower-case names its Vary lists. */
    static byte[] build(CacheRequest request, ResponseHead head, List<String> varyNames, byte[] body, int bodyLength) {
        return build(request.key, variant(request, varyNames), head, body, bodyLength);
    }

    /** The record of the same key and variant with another head and body: a coded variant's. */
    byte[] recoded(ResponseHead head, byte[] body) {
        byte[] key = Arrays.copyOfRange(record, FIXED, FIXED + keyLength);
        byte[] vary = Arrays.copyOfRange(record, FIXED + keyLength, FIXED + keyLength + varyLength);
        return build(key, vary, head, body, body.length);
    }

    private static byte[] build(byte[] key, byte[] vary, ResponseHead head, byte[] body, int bodyLength) {
        ByteArrayOutputStream headBytes = new ByteArrayOutputStream(head.count() * 32);
        for (int i = 0; i < head.count(); i++) {
            if (isAny(head, i, NOT_STORED)) continue;
            headBytes.write(head.data(), head.nameStart(i), head.nameLength(i));
            headBytes.write(0);
            headBytes.write(head.data(), head.valueStart(i), head.valueLength(i));
            headBytes.write(0);
        }
        if (!head.hasDate()) {
            // The transport would date every hit anew; the stored response keeps the date it was made (RFC 9110 §6.6.1).
            headBytes.writeBytes("date".getBytes(StandardCharsets.US_ASCII));
            headBytes.write(0);
            headBytes.writeBytes(HttpDate.now());
            headBytes.write(0);
        }
        byte[] headArray = headBytes.toByteArray();
        ByteBuffer out = ByteBuffer.allocate(FIXED + key.length + vary.length + headArray.length + bodyLength);
        out.putInt(key.length).putInt(vary.length).putInt(headArray.length).putInt(bodyLength).putInt(head.status()).putInt(0);
        out.put(key).put(vary).put(headArray).put(body, 0, bodyLength);
        return out.array();
    }

    /** The variant bytes of {@code request} for a response varying on {@code varyNames}. */
    static byte[] variant(CacheRequest request, List<String> varyNames) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (String name : varyNames) {
            out.writeBytes(name.getBytes(StandardCharsets.ISO_8859_1));
            out.write(0);
            out.writeBytes(request.varyValue(name).getBytes(StandardCharsets.ISO_8859_1));
            out.write(0);
        }
        return out.toByteArray();
    }

    /** The lower-case header names of a Vary value, in order, without duplicates. */
    static List<String> varyNames(String vary) {
        List<String> names = new ArrayList<>();
        if (vary == null) return names;
        for (String member : vary.split(",")) {
            String name = member.strip().toLowerCase(Locale.ROOT);
            if (!name.isEmpty() && !names.contains(name)) names.add(name);
        }
        return names;
    }

    /**
     * A 32-bit digest of the variant, kept in the slot so that a new variant replaces only the same one.
     * Its low {@value #CODING_BITS} bits are left for the content coding of the entry: 0, the identity
     * response the application sent; else a coded variant of it ({@link #codedVariant}).
     */
    static int variantHash(byte[] variant) {
        long h = CacheRequest.hash(variant);
        return (int) (h ^ h >>> 32) & ~CODING_MASK;
    }

    /** Identity and the three codings of {@link ContentCoding}. */
    static final int CODING_BITS = 2;
    private static final int CODING_MASK = (1 << CODING_BITS) - 1;

    /** The slot variant of {@code coding}'s variant of an entry stored under {@code variant}; null coding: identity. */
    static int codedVariant(int variant, ContentCoding coding) {
        return variant & ~CODING_MASK | (coding == null ? 0 : coding.ordinal() + 1);
    }

    /** Whether a slot variant is that of an entry in {@code coding} (null: identity). */
    static boolean codedAs(int variant, ContentCoding coding) {
        return (variant & CODING_MASK) == codedVariant(0, coding);
    }

    /** Whether a slot variant is the identity entry. */
    static boolean identity(int variant) {
        return (variant & CODING_MASK) == 0;
    }

    /** Whether two slot variants are codings of one variant. */
    static boolean sameVariant(int a, int b) {
        return (a & ~CODING_MASK) == (b & ~CODING_MASK);
    }

    int variantHash() {
        byte[] variant = new byte[varyLength];
        System.arraycopy(record, FIXED + keyLength, variant, 0, varyLength);
        return variantHash(variant);
    }

    boolean keyEquals(CacheRequest request) {
        return request.keyEquals(record, FIXED, keyLength);
    }

    /** Whether {@code request} selects this variant: each header the response varies on has the stored value. */
    boolean variantMatches(CacheRequest request) {
        int at = FIXED + keyLength, end = at + varyLength;
        while (at < end) {
            int nameEnd = nul(at), valueEnd = nul(nameEnd + 1);
            String name = new String(record, at, nameEnd - at, StandardCharsets.ISO_8859_1);
            String stored = new String(record, nameEnd + 1, valueEnd - nameEnd - 1, StandardCharsets.ISO_8859_1);
            if (!request.varyValue(name).equals(stored)) return false;
            at = valueEnd + 1;
        }
        return true;
    }

    /** A fresh head with the stored headers, for a hit; {@code only}, when not null, keeps just those (a 304's). */
    ResponseHead head(int status, List<String> only) {
        ResponseHead head = new ResponseHead(status);
        MemorySegment bytes = MemorySegment.ofArray(record);
        int at = FIXED + keyLength + varyLength, end = at + headLength;
        while (at < end) {
            int nameEnd = nul(at), valueEnd = nul(nameEnd + 1);
            if (only == null || isAny(at, nameEnd - at, only)) {
                head.add(bytes.asSlice(at, nameEnd - at), bytes.asSlice(nameEnd + 1, valueEnd - nameEnd - 1));
            }
            at = valueEnd + 1;
        }
        return head;
    }

    private boolean isAny(int start, int length, List<String> names) {
        for (String name : names) {
            if (HttpChars.equalsLowerCase(record, start, length, name)) return true;
        }
        return false;
    }

    /** A stored header's value; null when absent. */
    String header(String lowerCaseName) {
        int at = FIXED + keyLength + varyLength, end = at + headLength;
        while (at < end) {
            int nameEnd = nul(at), valueEnd = nul(nameEnd + 1);
            if (HttpChars.equalsLowerCase(record, at, nameEnd - at, lowerCaseName)) {
                return new String(record, nameEnd + 1, valueEnd - nameEnd - 1, StandardCharsets.ISO_8859_1);
            }
            at = valueEnd + 1;
        }
        return null;
    }

    int bodyStart() {
        return FIXED + keyLength + varyLength + headLength;
    }

    int bodyLength() {
        return bodyLength;
    }

    private int nul(int from) {
        int i = from;
        while (record[i] != 0) i++;
        return i;
    }

    private static boolean isAny(ResponseHead head, int i, List<String> names) {
        for (String name : names) {
            if (HttpChars.equalsLowerCase(head.data(), head.nameStart(i), head.nameLength(i), name)) return true;
        }
        return false;
    }
}
