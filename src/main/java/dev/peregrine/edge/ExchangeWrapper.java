package dev.peregrine.edge;

import dev.peregrine.http.BodyReceiver;
import dev.peregrine.http.FileBody;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.http.WakeupBatch;
import io.netty.buffer.ByteBuf;

import java.net.InetSocketAddress;

/**
 * An exchange that passes everything to the transport's, for a stage that transforms what goes through
 * it: it overrides {@link #send(ResponseHead, ByteBuf, boolean, WakeupBatch)} (both {@code send}s end
 * there) to change the response, or {@link #head} to show the application another request.
 */
public abstract class ExchangeWrapper implements HttpExchange {
    protected final HttpExchange wrapped;

    protected ExchangeWrapper(HttpExchange wrapped) {
        this.wrapped = wrapped;
    }

    @Override public HttpRequestHead head() { return wrapped.head(); }
    @Override public String httpVersion() { return wrapped.httpVersion(); }
    @Override public String scheme() { return wrapped.scheme(); }
    @Override public InetSocketAddress remoteAddress() { return wrapped.remoteAddress(); }
    @Override public InetSocketAddress localAddress() { return wrapped.localAddress(); }
    @Override public void receiveBody(BodyReceiver receiver) { wrapped.receiveBody(receiver); }
    @Override public void demand() { wrapped.demand(); }
    @Override public void abort() { wrapped.abort(); }
    @Override public boolean writable() { return wrapped.writable(); }
    @Override public void whenWritable(Runnable task) { wrapped.whenWritable(task); }
    @Override public boolean disconnected() { return wrapped.disconnected(); }
    @Override public boolean endedByServer() { return wrapped.endedByServer(); }
    @Override public void runOnLoop(Runnable task, int bytes, WakeupBatch batch) { wrapped.runOnLoop(task, bytes, batch); }

    @Override
    public void sendFile(ResponseHead head, FileBody body) {
        wrapped.sendFile(head, body);
    }

    @Override
    public final void send(ResponseHead head, ByteBuf body, boolean last) {
        send(head, body, last, null);
    }

    @Override
    public void send(ResponseHead head, ByteBuf body, boolean last, WakeupBatch batch) {
        wrapped.send(head, body, last, batch);
    }
}
