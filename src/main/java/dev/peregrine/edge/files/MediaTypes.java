package dev.peregrine.edge.files;

import java.util.Locale;
import java.util.Map;

/**
 * The Content-Type of a file, by its extension. A fixed table rather than the JDK's
 * {@code Files.probeContentType}, whose answer depends on the machine's mime.types (and says nothing of
 * .mjs, .wasm or .webmanifest on many); text types carry {@code charset=utf-8}, as files of the web are.
 */
final class MediaTypes {
    private static final String DEFAULT = "application/octet-stream";
    private static final Map<String, String> BY_EXTENSION = Map.ofEntries(
            Map.entry("html", "text/html; charset=utf-8"),
            Map.entry("htm", "text/html; charset=utf-8"),
            Map.entry("css", "text/css; charset=utf-8"),
            Map.entry("js", "text/javascript; charset=utf-8"),
            Map.entry("mjs", "text/javascript; charset=utf-8"),
            Map.entry("txt", "text/plain; charset=utf-8"),
            Map.entry("csv", "text/csv; charset=utf-8"),
            Map.entry("md", "text/markdown; charset=utf-8"),
            Map.entry("xml", "text/xml; charset=utf-8"),
            Map.entry("ics", "text/calendar; charset=utf-8"),
            Map.entry("vtt", "text/vtt; charset=utf-8"),
            Map.entry("json", "application/json"),
            Map.entry("map", "application/json"),
            Map.entry("jsonld", "application/ld+json"),
            Map.entry("webmanifest", "application/manifest+json"),
            Map.entry("wasm", "application/wasm"),
            Map.entry("pdf", "application/pdf"),
            Map.entry("zip", "application/zip"),
            Map.entry("gz", "application/gzip"),
            Map.entry("br", "application/octet-stream"),
            Map.entry("zst", "application/zstd"),
            Map.entry("tar", "application/x-tar"),
            Map.entry("rss", "application/rss+xml"),
            Map.entry("atom", "application/atom+xml"),
            Map.entry("xhtml", "application/xhtml+xml"),
            Map.entry("svg", "image/svg+xml"),
            Map.entry("png", "image/png"),
            Map.entry("jpg", "image/jpeg"),
            Map.entry("jpeg", "image/jpeg"),
            Map.entry("gif", "image/gif"),
            Map.entry("webp", "image/webp"),
            Map.entry("avif", "image/avif"),
            Map.entry("ico", "image/vnd.microsoft.icon"),
            Map.entry("bmp", "image/bmp"),
            Map.entry("woff", "font/woff"),
            Map.entry("woff2", "font/woff2"),
            Map.entry("ttf", "font/ttf"),
            Map.entry("otf", "font/otf"),
            Map.entry("eot", "application/vnd.ms-fontobject"),
            Map.entry("mp3", "audio/mpeg"),
            Map.entry("ogg", "audio/ogg"),
            Map.entry("oga", "audio/ogg"),
            Map.entry("wav", "audio/wav"),
            Map.entry("flac", "audio/flac"),
            Map.entry("m4a", "audio/mp4"),
            Map.entry("mp4", "video/mp4"),
            Map.entry("webm", "video/webm"),
            Map.entry("ogv", "video/ogg"),
            Map.entry("mov", "video/quicktime"));

    private MediaTypes() {}

    static String of(String fileName) {
        int dot = fileName.lastIndexOf('.');
        if (dot < 0) return DEFAULT;
        return BY_EXTENSION.getOrDefault(fileName.substring(dot + 1).toLowerCase(Locale.ROOT), DEFAULT);
    }
}
