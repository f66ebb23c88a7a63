package dev.peregrine.config;

import io.netty.channel.Channel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.channel.unix.DomainSocketChannel;
import io.netty.util.NetUtil;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * The peers whose forwarding headers are believed ({@code --forwarded-allow-ips}): IP addresses, CIDR
 * blocks, {@code unix} for peers on a unix socket, or {@code *} for every peer. Only literals are
 * accepted: a host name would need DNS, and a trust decision must not depend on a resolver.
 *
 * <p>CIDR matching is written here rather than taken from Netty's {@code IpSubnetFilterRule} because
 * that class wants an {@code InetSocketAddress} per check and may resolve names when built, while the
 * entries of a forwarded chain are checked as raw address bytes.
 */
public final class TrustedProxies {
    /** As uvicorn and gunicorn: the loopback addresses, so a proxy on the same host works out of the box. */
    public static final String DEFAULT = "127.0.0.1,::1";

    private final boolean everyone;
    private final boolean unix;
    /** Network addresses (4 or 16 bytes, host bits cleared) and their prefix lengths. */
    private final byte[][] networks;
    private final int[] prefixes;

    private TrustedProxies(boolean everyone, boolean unix, byte[][] networks, int[] prefixes) {
        this.everyone = everyone;
        this.unix = unix;
        this.networks = networks;
        this.prefixes = prefixes;
    }

    /**
     * Parses a comma-separated list. Throws IllegalArgumentException naming the first entry that is
     * neither an address, a CIDR block, {@code unix} nor {@code *}.
     */
    public static TrustedProxies parse(String list) {
        boolean everyone = false, unix = false;
        List<byte[]> networks = new ArrayList<>();
        List<Integer> prefixes = new ArrayList<>();
        for (String raw : list.split(",", -1)) {
            String entry = raw.strip();
            if (entry.isEmpty()) continue;
            if (entry.equals("*")) {
                everyone = true;
                continue;
            }
            if (entry.equals("unix")) {
                unix = true;
                continue;
            }
            int slash = entry.indexOf('/');
            byte[] address = slash < 0 ? IpLiterals.parse(entry) : IpLiterals.parse(entry.substring(0, slash));
            if (address == null) {
                throw new IllegalArgumentException("'" + entry + "' is not an IP address, a CIDR block, unix or *");
            }
            int bits = address.length * 8;
            int prefix = bits;
            if (slash >= 0) {
                prefix = prefixLength(entry.substring(slash + 1), bits);
                if (prefix < 0) throw new IllegalArgumentException("'" + entry + "' has no valid prefix length (0 to " + bits + ")");
            }
            // An IPv4 block written in IPv6 form (::ffff:10.0.0.0/104) is the same block as 10.0.0.0/8.
            if (address.length == 16 && prefix >= 96 && IpLiterals.isV4Mapped(address)) {
                address = IpLiterals.v4(address);
                prefix -= 96;
            }
            networks.add(mask(address, prefix));
            prefixes.add(prefix);
        }
        return new TrustedProxies(everyone, unix, networks.toArray(byte[][]::new),
                prefixes.stream().mapToInt(Integer::intValue).toArray());
    }

    public boolean trustsEveryone() {
        return everyone;
    }

    /**
     * Whether the forwarding headers arriving on {@code channel} are believed: decided once per
     * connection, since its peer cannot change. A unix socket is recognised by its channel type, because
     * the peer of an accepted unix connection usually has no address at all.
     */
    public boolean trustsPeerOf(Channel channel) {
        if (everyone) return true;
        if (channel instanceof DomainSocketChannel) return unix;
        SocketAddress peer = channel.remoteAddress();
        if (peer instanceof DomainSocketAddress) return unix;
        if (peer instanceof InetSocketAddress inet && inet.getAddress() != null) return trusts(inet.getAddress());
        return false;
    }

    /** Whether an address named in a forwarded chain is one of the trusted proxies. */
    public boolean trusts(InetAddress address) {
        if (everyone) return true;
        byte[] bytes = address.getAddress();
        if (bytes.length == 16 && IpLiterals.isV4Mapped(bytes)) bytes = IpLiterals.v4(bytes);
        for (int i = 0; i < networks.length; i++) {
            if (networks[i].length == bytes.length && matches(networks[i], prefixes[i], bytes)) return true;
        }
        return false;
    }

    private static boolean matches(byte[] network, int prefix, byte[] address) {
        int whole = prefix / 8;
        for (int i = 0; i < whole; i++) {
            if (network[i] != address[i]) return false;
        }
        int rest = prefix % 8;
        if (rest == 0) return true;
        int mask = (0xff << (8 - rest)) & 0xff;
        return (network[whole] & mask) == (address[whole] & mask);
    }

    private static byte[] mask(byte[] address, int prefix) {
        byte[] masked = address.clone();
        for (int bit = prefix; bit < masked.length * 8; bit++) {
            masked[bit / 8] &= (byte) ~(0x80 >>> (bit % 8));
        }
        return masked;
    }

    private static int prefixLength(String text, int max) {
        if (text.isEmpty() || text.length() > 3) return -1;
        for (int i = 0; i < text.length(); i++) {
            if (text.charAt(i) < '0' || text.charAt(i) > '9') return -1;
        }
        int value = Integer.parseInt(text);
        return value <= max ? value : -1;
    }

    /** Address literals without DNS: Netty's parser, which returns null for anything but an IPv4 or IPv6 literal. */
    public static final class IpLiterals {
        private IpLiterals() {}

        public static byte[] parse(String text) {
            return NetUtil.createByteArrayFromIpAddressString(text);
        }

        public static boolean isV4Mapped(byte[] address) {
            for (int i = 0; i < 10; i++) {
                if (address[i] != 0) return false;
            }
            return address[10] == (byte) 0xff && address[11] == (byte) 0xff;
        }

        public static byte[] v4(byte[] mapped) {
            return new byte[] {mapped[12], mapped[13], mapped[14], mapped[15]};
        }
    }
}
