package dev.peregrine.config;

/**
 * Everything the server needs to know, resolved and checked once from the command line and the
 * configuration layers, one group per concern. Built by the command line ({@code cli}); read by every
 * other package, which is why this package imports none of them.
 */
public record ServerSettings(
        ListenSettings listen,
        AppSettings app,
        PythonSettings python,
        LimitSettings limits,
        WorkerSettings workers,
        TlsSettings tls,
        ProtocolSettings protocols,
        /** Null when upgrades are refused (--no-websockets, or WSGI). */
        WebSocketSettings webSocket,
        EdgeSettings edge,
        OperationsSettings operations,
        /** Null without --shared-store: every replica keeps its own counts. */
        SharedStoreSettings sharedStore) {
}
