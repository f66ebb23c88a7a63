package dev.peregrine.webtransport;

import io.netty.buffer.ByteBuf;

/**
 * QUIC's variable-length integers (RFC 9000 16), which frame HTTP/3, its stream headers and the capsules.
 * Written here because the codecs' own (Netty's Http3CodecUtils) are not public.
 */
public final class Varint {
    public static final long MAX = (1L << 62) - 1;

    private Varint() {}

    /** The length of the varint whose first byte is {@code first}: 1, 2, 4 or 8. */
    public static int length(byte first) {
        return 1 << ((first & 0xff) >>> 6);
    }

    /** Bytes needed to write {@code value}. */
    public static int size(long value) {
        if (value < 0 || value > MAX) throw new IllegalArgumentException("not a QUIC varint: " + value);
        if (value < 64) return 1;
        if (value < 16384) return 2;
        if (value < 1L << 30) return 4;
        return 8;
    }

    /** Whether a whole varint is readable at the reader index. */
    public static boolean readable(ByteBuf in) {
        return in.isReadable() && in.readableBytes() >= length(in.getByte(in.readerIndex()));
    }

    /** Reads one; the caller checked {@link #readable}. */
    public static long read(ByteBuf in) {
        int length = length(in.getByte(in.readerIndex()));
        return switch (length) {
            case 1 -> in.readByte() & 0x3f;
            case 2 -> in.readShort() & 0x3fff;
            case 4 -> in.readInt() & 0x3fffffffL;
            default -> in.readLong() & 0x3fffffffffffffffL;
        };
    }

    /** The varint at {@code index}, without moving the reader; the caller checked it is all there. */
    public static long get(ByteBuf in, int index) {
        int length = length(in.getByte(index));
        return switch (length) {
            case 1 -> in.getByte(index) & 0x3f;
            case 2 -> in.getShort(index) & 0x3fff;
            case 4 -> in.getInt(index) & 0x3fffffffL;
            default -> in.getLong(index) & 0x3fffffffffffffffL;
        };
    }

    public static void write(ByteBuf out, long value) {
        switch (size(value)) {
            case 1 -> out.writeByte((int) value);
            case 2 -> out.writeShort((int) value | 0x4000);
            case 4 -> out.writeInt((int) value | 0x80000000);
            default -> out.writeLong(value | 0xc000000000000000L);
        }
    }
}
