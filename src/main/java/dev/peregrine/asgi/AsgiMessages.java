package dev.peregrine.asgi;

import dev.peregrine.python.Py;
import dev.peregrine.python.PythonRaise;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/** The strings of ASGI messages, made once: dictionary keys, message types, and the messages we build. */
final class AsgiMessages {
    final MemorySegment type = Py.internedStr("type");
    final MemorySegment body = Py.internedStr("body");
    final MemorySegment moreBody = Py.internedStr("more_body");
    final MemorySegment status = Py.internedStr("status");
    final MemorySegment path = Py.internedStr("path");
    final MemorySegment headers = Py.internedStr("headers");
    final MemorySegment httpRequest = Py.internedStr("http.request");
    final MemorySegment httpDisconnect = Py.internedStr("http.disconnect");
    final MemorySegment emptyBytes = Py.bytes(new byte[0]);
    final MemorySegment text = Py.internedStr("text");
    final MemorySegment bytes = Py.internedStr("bytes");
    final MemorySegment code = Py.internedStr("code");
    final MemorySegment reason = Py.internedStr("reason");
    final MemorySegment subprotocol = Py.internedStr("subprotocol");
    final MemorySegment wsConnect = Py.internedStr("websocket.connect");
    final MemorySegment wsReceive = Py.internedStr("websocket.receive");
    final MemorySegment wsDisconnect = Py.internedStr("websocket.disconnect");
    final MemorySegment stream = Py.internedStr("stream");
    final MemorySegment data = Py.internedStr("data");
    final MemorySegment endStream = Py.internedStr("end_stream");
    final MemorySegment bidirectional = Py.internedStr("bidirectional");
    final MemorySegment wtConnect = Py.internedStr("webtransport.connect");
    final MemorySegment wtStreamReceive = Py.internedStr("webtransport.stream.receive");
    final MemorySegment wtStreamReset = Py.internedStr("webtransport.stream.reset");
    final MemorySegment wtDatagramReceive = Py.internedStr("webtransport.datagram.receive");
    final MemorySegment wtDisconnect = Py.internedStr("webtransport.disconnect");

    private static final Arena CONSTANTS = Arena.global();
    static final MemorySegment RESPONSE_START = CONSTANTS.allocateFrom("http.response.start", StandardCharsets.US_ASCII).asSlice(0, 19);
    static final MemorySegment RESPONSE_BODY = CONSTANTS.allocateFrom("http.response.body", StandardCharsets.US_ASCII).asSlice(0, 18);
    static final MemorySegment RESPONSE_PATHSEND = constant("http.response.pathsend");
    static final MemorySegment WS_ACCEPT = constant("websocket.accept");
    static final MemorySegment WS_SEND = constant("websocket.send");
    static final MemorySegment WS_CLOSE = constant("websocket.close");
    static final MemorySegment WS_RESPONSE_START = constant("websocket.http.response.start");
    static final MemorySegment WS_RESPONSE_BODY = constant("websocket.http.response.body");
    static final MemorySegment WT_ACCEPT = constant("webtransport.accept");
    static final MemorySegment WT_CLOSE = constant("webtransport.close");
    static final MemorySegment WT_STREAM_SEND = constant("webtransport.stream.send");
    static final MemorySegment WT_DATAGRAM_SEND = constant("webtransport.datagram.send");
    static final MemorySegment WT_STREAM_OPEN = constant("webtransport.stream.open");
    static final MemorySegment WT_STREAM_RESET = constant("webtransport.stream.reset");
    static final MemorySegment WT_STREAM_STOP = constant("webtransport.stream.stop");

    private static MemorySegment constant(String text) {
        return CONSTANTS.allocateFrom(text, StandardCharsets.US_ASCII).asSlice(0, text.length());
    }

    /** Whether a str's UTF-8 contents equal a constant. */
    static boolean is(MemorySegment text, MemorySegment constant) {
        return text.byteSize() == constant.byteSize() && MemorySegment.mismatch(text, 0, text.byteSize(), constant, 0, constant.byteSize()) == -1;
    }

    /** {"type": "http.request", "body": body, "more_body": more}; steals body. */
    MemorySegment request(MemorySegment bodyBytes, boolean more) {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, httpRequest);
        Py.dictSetSteal(message, body, bodyBytes);
        Py.dictSet(message, moreBody, more ? Py.True : Py.False);
        return message;
    }

    MemorySegment webSocketConnect() {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, wsConnect);
        return message;
    }

    /** {"type": "websocket.receive", "text" or "bytes": data}; steals data. */
    MemorySegment webSocketReceive(MemorySegment data, boolean isText) {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, wsReceive);
        Py.dictSetSteal(message, isText ? text : bytes, data);
        return message;
    }

    MemorySegment webSocketDisconnect(int closeCode, String closeReason) {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, wsDisconnect);
        Py.dictSetSteal(message, code, Py.integer(closeCode));
        Py.dictSetSteal(message, reason, Py.str(closeReason));
        return message;
    }

    /** {"type": type} */
    MemorySegment ofType(MemorySegment messageType) {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, messageType);
        return message;
    }

    /** {"type": "webtransport.stream.receive", "stream": id, "data": data, "end_stream": end}; steals data. */
    MemorySegment webTransportStream(long streamId, MemorySegment bytesObject, boolean end) {
        MemorySegment message = ofType(wtStreamReceive);
        Py.dictSetSteal(message, stream, Py.integer(streamId));
        Py.dictSetSteal(message, data, bytesObject);
        Py.dictSet(message, endStream, end ? Py.True : Py.False);
        return message;
    }

    /** {"type": "webtransport.stream.reset", "stream": id, "code": code}; a negative code is None (the reset carried none). */
    MemorySegment webTransportReset(long streamId, long errorCode) {
        MemorySegment message = ofType(wtStreamReset);
        Py.dictSetSteal(message, stream, Py.integer(streamId));
        Py.dictSetSteal(message, code, errorCode < 0 ? Py.newRef(Py.None) : Py.integer(errorCode));
        return message;
    }

    /** {"type": "webtransport.datagram.receive", "data": data}; steals data. */
    MemorySegment webTransportDatagram(MemorySegment bytesObject) {
        MemorySegment message = ofType(wtDatagramReceive);
        Py.dictSetSteal(message, data, bytesObject);
        return message;
    }

    MemorySegment webTransportDisconnect(long closeCode, String closeReason) {
        MemorySegment message = ofType(wtDisconnect);
        Py.dictSetSteal(message, code, Py.integer(closeCode));
        Py.dictSetSteal(message, reason, Py.str(closeReason));
        return message;
    }

    MemorySegment disconnect() {
        MemorySegment message = Py.newDict();
        Py.dictSet(message, type, httpDisconnect);
        return message;
    }

    /** The bytes of a message's 'type'; raises in the application for what is no ASGI message. */
    MemorySegment typeOf(MemorySegment message) {
        if (!Py.isInstance(message, Py.DictType)) throw new PythonRaise(Py.ExcTypeError, "ASGI messages must be dicts");
        MemorySegment typeObject = Py.dictGet(message, type);
        MemorySegment bytes = typeObject == null ? null : Py.bufferOf(typeObject);
        if (bytes == null) throw new PythonRaise(Py.ExcValueError, "ASGI message without a 'type'");
        return bytes;
    }

}
