package dev.peregrine.http;

import java.nio.charset.StandardCharsets;

/**
 * A response the server makes itself for a request it will not serve (400, 408, 413, 431, 501...):
 * the status, its reason and a detail as a short text body, the same on every transport, which frames it.
 */
public record Refusal(int status, ResponseHead head, byte[] body) {

    /** {@code detail}: what was wrong, after the reason phrase ("Payload Too Large: request body larger than --max-body"). */
    public static Refusal of(int status, String detail) {
        String text = StatusReasons.reason(status) + (detail == null || detail.isEmpty() ? "" : ": " + detail) + "\n";
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        ResponseHead head = new ResponseHead(status);
        head.add("content-type", "text/plain; charset=utf-8");
        head.add("content-length", Integer.toString(body.length));
        return new Refusal(status, head, body);
    }
}
