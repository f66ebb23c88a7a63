package dev.peregrine.edge;

import dev.peregrine.http.HttpRequestHead;
import dev.peregrine.http.ResponseHead;

/**
 * What the compression stage lends a stage that keeps responses (the cache), so that a kept response is
 * compressed once by the same rules rather than on every hit, without one feature importing another.
 */
public interface ContentEncoder {
    /** A response and its whole body in a content coding. */
    record Coded(ResponseHead head, byte[] body) {}

    /** The coding the response to {@code head} is sent in; null for identity. */
    ContentCoding coding(HttpRequestHead head);

    /** {@code head} and its whole body in {@code coding}; null when the response is not one that is compressed. */
    Coded encode(ResponseHead head, byte[] body, int offset, int length, ContentCoding coding);
}
