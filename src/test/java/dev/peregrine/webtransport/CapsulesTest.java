package dev.peregrine.webtransport;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

class CapsulesTest {
    @ParameterizedTest
    @ValueSource(longs = {0, 63, 64, 16383, 16384, (1L << 30) - 1, 1L << 30, Varint.MAX})
    void varintsRoundTripAtEveryLength(long value) {
        ByteBuf out = Unpooled.buffer();
        Varint.write(out, value);
        assertEquals(Varint.size(value), out.readableBytes());
        assertEquals(value, Varint.get(out, 0));
        assertEquals(value, Varint.read(out));
    }

    @Test
    void aCloseCapsuleReadsBackWhenWholeAndWaitsWhenNot() throws Exception {
        ByteBuf capsule = Capsules.close(ByteBufAllocator.DEFAULT, 4242, "done é");
        ByteBuf partial = capsule.retainedSlice(0, capsule.readableBytes() - 1);
        assertNull(Capsules.next(partial));
        assertEquals(0, partial.readerIndex(), "an unfinished capsule is not read past");
        partial.release();
        assertEquals(new Capsules.Close(4242, "done é"), Capsules.next(capsule));
        assertEquals(0, capsule.readableBytes());
        capsule.release();
    }

    @Test
    void otherCapsulesAreSkipped() throws Exception {
        ByteBuf in = Unpooled.buffer();
        Varint.write(in, Capsules.DRAIN_WEBTRANSPORT_SESSION);
        Varint.write(in, 0);
        Varint.write(in, 0x21);
        Varint.write(in, 2);
        in.writeShort(0);
        assertSame(Capsules.SKIPPED, Capsules.next(in));
        assertSame(Capsules.SKIPPED, Capsules.next(in));
        assertNull(Capsules.next(in));
    }

    @Test
    void malformedClosesAreRefused() {
        assertThrows(Capsules.Malformed.class, () -> Capsules.next(capsule(Capsules.CLOSE_WEBTRANSPORT_SESSION, new byte[] {0, 1})));
        assertThrows(Capsules.Malformed.class, () -> Capsules.next(capsule(Capsules.CLOSE_WEBTRANSPORT_SESSION,
                new byte[] {0, 0, 0, 1, (byte) 0xff})));
        assertThrows(Capsules.Malformed.class, () -> Capsules.next(capsule(Capsules.CLOSE_WEBTRANSPORT_SESSION,
                new byte[4 + Capsules.MAX_REASON_BYTES + 1])));
        ByteBuf huge = Unpooled.buffer();
        Varint.write(huge, 0x21);
        Varint.write(huge, Capsules.MAX_CAPSULE + 1);
        assertThrows(Capsules.Malformed.class, () -> Capsules.next(huge));
    }

    private static ByteBuf capsule(long type, byte[] payload) {
        ByteBuf out = Unpooled.buffer();
        Varint.write(out, type);
        Varint.write(out, payload.length);
        out.writeBytes(payload);
        return out;
    }
}
