package dev.peregrine.http;

/**
 * A request head as every transport presents it to the application adapters: one byte array and
 * offsets into it, so that the Python bridge can make bytes and str objects straight from the array.
 * Header names are lower-case.
 */
public interface HttpRequestHead {
    byte[] bytes();
    String method();
    int pathStart();
    int pathLength();
    int queryStart();
    int queryLength();
    int headerCount();
    int nameStart(int i);
    int nameLength(int i);
    int valueStart(int i);
    int valueLength(int i);
    /** -1 when the length is not known in advance. */
    long contentLength();
    boolean chunked();
}
