package dev.peregrine.config;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.net.InetAddress;
import java.net.UnknownHostException;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class TrustedProxiesTest {

    private static InetAddress ip(String literal) {
        try {
            return InetAddress.getByAddress(TrustedProxies.IpLiterals.parse(literal));
        } catch (UnknownHostException e) {
            throw new AssertionError(e);
        }
    }

    @ParameterizedTest(name = "{0} trusts {1}: {2}")
    @CsvSource(delimiter = '|', value = {
            "127.0.0.1,::1       | 127.0.0.1        | true",
            "127.0.0.1,::1       | ::1              | true",
            "127.0.0.1,::1       | 127.0.0.2        | false",
            "127.0.0.1,::1       | ::ffff:127.0.0.1 | true",
            "10.0.0.0/8          | 10.255.1.2       | true",
            "10.0.0.0/8          | 11.0.0.1         | false",
            "10.0.0.1/8          | 10.9.9.9         | true",
            "192.168.1.128/25    | 192.168.1.200    | true",
            "192.168.1.128/25    | 192.168.1.127    | false",
            "172.16.0.0/12       | 172.31.255.255   | true",
            "172.16.0.0/12       | 172.32.0.0       | false",
            "2001:db8::/32       | 2001:db8:1::5    | true",
            "2001:db8::/32       | 2001:db9::1      | false",
            "2001:db8::/32       | 10.0.0.1         | false",
            "10.0.0.0/8          | 2001:db8::1      | false",
            "::ffff:10.0.0.0/104 | 10.1.2.3         | true",
            "0.0.0.0/0           | 203.0.113.9      | true",
            "0.0.0.0/0           | ::1              | false",
            "::/0                | 2001:db8::1      | true",
            "' 10.0.0.1 , 10.0.0.2 ' | 10.0.0.2     | true",
            "*                   | 203.0.113.9      | true",
            "unix                | 127.0.0.1        | false",
            "''                  | 127.0.0.1        | false",
    })
    void matchesAddressesAndBlocks(String list, String address, boolean trusted) {
        assertEquals(trusted, TrustedProxies.parse(list).trusts(ip(address)));
    }

    @Test
    void starTrustsEveryoneAndUnixOnlyUnixPeers() {
        assertTrue(TrustedProxies.parse("*").trustsEveryone());
        assertTrue(TrustedProxies.parse("10.0.0.1,*").trustsEveryone());
        assertFalse(TrustedProxies.parse("unix").trustsEveryone());
        assertFalse(TrustedProxies.parse(TrustedProxies.DEFAULT).trustsEveryone());
    }

    @ParameterizedTest
    @ValueSource(strings = {"localhost", "example.com", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/8/8",
            "1.2.3", "1.2.3.4.5", "unix:/run/app.sock", "**", "10.0.0.1:80"})
    void refusesWhatIsNotALiteral(String entry) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> TrustedProxies.parse("127.0.0.1," + entry));
        assertTrue(e.getMessage().contains("'" + entry + "'"), e.getMessage());
    }
}
