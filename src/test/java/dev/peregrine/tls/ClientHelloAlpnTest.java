package dev.peregrine.tls;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import org.junit.jupiter.api.Test;

import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.SSLParameters;
import java.nio.ByteBuffer;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** ClientHelloAlpn on ClientHellos made by the JDK's TLS client, cut the way Netty's SNI handler hands them over. */
class ClientHelloAlpnTest {
    @Test
    void findsAnOfferedProtocolAmongOthers() throws Exception {
        ByteBuf hello = clientHello("h2", "acme-tls/1", "http/1.1");
        assertTrue(ClientHelloAlpn.offers(hello, "acme-tls/1"));
        assertTrue(ClientHelloAlpn.offers(hello, "h2"));
        assertFalse(ClientHelloAlpn.offers(hello, "acme-tls/2"));
        assertFalse(ClientHelloAlpn.offers(hello, "acme-tls"));
    }

    @Test
    void listsWhatIsOfferedInOrder() throws Exception {
        assertEquals(List.of("h2", "acme-tls/1", "http/1.1"), ClientHelloAlpn.offered(clientHello("h2", "acme-tls/1", "http/1.1")));
        assertNull(ClientHelloAlpn.offered(clientHello()));
    }

    @Test
    void aHelloWithoutAlpnOffersNothing() throws Exception {
        assertFalse(ClientHelloAlpn.offers(clientHello(), "acme-tls/1"));
    }

    @Test
    void aTruncatedHelloOffersNothingAndDoesNotThrow() throws Exception {
        ByteBuf hello = clientHello("acme-tls/1");
        for (int length = 0; length < hello.readableBytes(); length++) {
            ByteBuf cut = hello.slice(hello.readerIndex(), length);
            // Whatever a prefix holds, reading it stays within it.
            ClientHelloAlpn.offers(cut, "acme-tls/1");
        }
        assertFalse(ClientHelloAlpn.offers(Unpooled.EMPTY_BUFFER, "acme-tls/1"));
    }

    /** The body of the ClientHello handshake message (from client_version on), as AbstractSniHandler passes it. */
    private static ByteBuf clientHello(String... protocols) throws Exception {
        SSLEngine engine = SSLContext.getDefault().createSSLEngine("test.example", 443);
        engine.setUseClientMode(true);
        SSLParameters parameters = engine.getSSLParameters();
        parameters.setApplicationProtocols(protocols);
        engine.setSSLParameters(parameters);
        ByteBuffer out = ByteBuffer.allocate(engine.getSession().getPacketBufferSize());
        engine.wrap(ByteBuffer.allocate(0), out);
        out.flip();
        ByteBuf record = Unpooled.wrappedBuffer(out);
        int length = record.getUnsignedMedium(5 + 1);
        return record.slice(5 + 4, length);
    }
}
