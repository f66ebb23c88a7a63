package dev.peregrine.python;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;

/** Copies between Netty buffers and Python objects, with one memcpy each way. */
public final class NativeBuffers {
    private NativeBuffers() {}

    /** A new bytes object holding the readable bytes of {@code buf} (the buffer is not released). */
    public static MemorySegment toBytes(ByteBuf buf) {
        int length = buf.readableBytes();
        if (buf.hasArray()) return Py.bytes(buf.array(), buf.arrayOffset() + buf.readerIndex(), length);
        if (buf.nioBufferCount() == 1) {
            ByteBuffer nio = buf.nioBuffer(buf.readerIndex(), length);
            if (nio.isDirect()) return Py.bytes(MemorySegment.ofBuffer(nio), length);
        }
        byte[] copy = new byte[length];
        buf.getBytes(buf.readerIndex(), copy);
        return Py.bytes(copy, 0, length);
    }

    /** A new str decoded from the readable bytes of {@code buf}, which hold UTF-8 (the buffer is not released). */
    public static MemorySegment toStr(ByteBuf buf) {
        int length = buf.readableBytes();
        if (buf.nioBufferCount() == 1) {
            ByteBuffer nio = buf.nioBuffer(buf.readerIndex(), length);
            if (nio.isDirect()) return Py.utf8(MemorySegment.ofBuffer(nio), length);
        }
        byte[] copy = new byte[length];
        buf.getBytes(buf.readerIndex(), copy);
        return Py.utf8(copy, 0, length);
    }

    /** A pooled direct buffer holding a copy of native memory (the contents of a Python object). */
    public static ByteBuf fromNative(ByteBufAllocator alloc, MemorySegment data) {
        int length = (int) data.byteSize();
        ByteBuf buf = alloc.directBuffer(length);
        if (buf.nioBufferCount() == 1) {
            ByteBuffer target = buf.nioBuffer(0, length);
            MemorySegment.copy(data, 0, MemorySegment.ofBuffer(target), 0, length);
        } else {
            byte[] copy = data.toArray(ValueLayout.JAVA_BYTE);
            buf.setBytes(0, copy);
        }
        buf.writerIndex(length);
        return buf;
    }
}
