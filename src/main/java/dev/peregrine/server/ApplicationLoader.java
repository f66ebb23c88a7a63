package dev.peregrine.server;

import dev.peregrine.python.Py;
import dev.peregrine.python.PythonException;

import java.lang.foreign.MemorySegment;

/** Imports the user's application with the GIL held, and tells ASGI from WSGI. */
final class ApplicationLoader {
    /** The application object (a new reference) and its protocol. */
    record Loaded(MemorySegment app, String protocol) {}

    /** Why the application cannot be served; {@link #traceback} is empty for a plain one-line reason. */
    static final class LoadFailure extends RuntimeException {
        private final String traceback;
        /** A contradiction in the command line (--protocol against the application): exit status 2. */
        private final boolean usage;

        LoadFailure(String message, String traceback) {
            this(message, traceback, false);
        }

        LoadFailure(String message, String traceback, boolean usage) {
            super(message, null, false, false);
            this.traceback = traceback;
            this.usage = usage;
        }

        boolean usage() { return usage; }

        String traceback() { return traceback; }
    }

    private ApplicationLoader() {}

    static Loaded load(String target, boolean factory, String protocol) {
        MemorySegment loader = Py.importModule("peregrine._loader");
        MemorySegment load = Py.getAttr(loader, "load");
        MemorySegment targetStr = Py.str(target), protocolStr = Py.str(protocol);
        MemorySegment factoryFlag = Py.bool(factory);
        try {
            MemorySegment result = Py.call(load, targetStr, factoryFlag, protocolStr);
            MemorySegment app = Py.newRef(Py.fastItem(result, 0));
            String kind = Py.toJavaString(Py.fastItem(result, 1));
            Py.decRef(result);
            return new Loaded(app, kind);
        } catch (PythonException e) {
            if ("ProtocolMismatch".equals(e.typeName())) {
                throw new LoadFailure(e.getMessage().substring("ProtocolMismatch: ".length()), "", true);
            }
            if ("LoadError".equals(e.typeName())) throw new LoadFailure(e.getMessage().substring("LoadError: ".length()), "");
            throw new LoadFailure("the application failed to import: " + e.getMessage(), e.traceback());
        } finally {
            Py.decRef(targetStr);
            Py.decRef(protocolStr);
            Py.decRef(factoryFlag);
            Py.decRef(load);
            Py.decRef(loader);
        }
    }
}
