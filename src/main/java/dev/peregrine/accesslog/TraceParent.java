package dev.peregrine.accesslog;

/**
 * The W3C Trace Context {@code traceparent} header ({@code --trace-context}): version-trace_id-parent_id-flags,
 * e.g. {@code 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01}. Only read for the access log; the
 * application gets the header as it came.
 *
 * <p>Checked as the specification asks: lower-case hex only, the right lengths and dashes, neither ID all
 * zeros, version {@code ff} refused. A later version than 00 is read by its first 55 characters, which the
 * specification guarantees keep this layout, as long as what follows them starts with a dash.
 */
public final class TraceParent {
    private TraceParent() {}

    public static final int TRACE_ID_OFFSET = 3;
    public static final int TRACE_ID_LENGTH = 32;
    public static final int PARENT_ID_OFFSET = 36;
    public static final int PARENT_ID_LENGTH = 16;
    private static final int LENGTH = 55;

    /** Whether data[start, start+length) is a valid traceparent value. */
    public static boolean valid(byte[] data, int start, int length) {
        if (length < LENGTH) return false;
        if (!lowerHex(data, start, 2)) return false;
        boolean version00 = data[start] == '0' && data[start + 1] == '0';
        if (data[start] == 'f' && data[start + 1] == 'f') return false;
        if (version00 ? length != LENGTH : length > LENGTH && data[start + LENGTH] != '-') return false;
        if (data[start + 2] != '-' || data[start + 35] != '-' || data[start + 52] != '-') return false;
        return lowerHex(data, start + TRACE_ID_OFFSET, TRACE_ID_LENGTH) && !zeros(data, start + TRACE_ID_OFFSET, TRACE_ID_LENGTH)
                && lowerHex(data, start + PARENT_ID_OFFSET, PARENT_ID_LENGTH) && !zeros(data, start + PARENT_ID_OFFSET, PARENT_ID_LENGTH)
                && lowerHex(data, start + 53, 2);
    }

    private static boolean lowerHex(byte[] data, int start, int length) {
        for (int i = start; i < start + length; i++) {
            byte b = data[i];
            if (!((b >= '0' && b <= '9') || (b >= 'a' && b <= 'f'))) return false;
        }
        return true;
    }

    private static boolean zeros(byte[] data, int start, int length) {
        for (int i = start; i < start + length; i++) {
            if (data[i] != '0') return false;
        }
        return true;
    }
}
