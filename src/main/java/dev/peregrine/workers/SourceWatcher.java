package dev.peregrine.workers;

import org.jboss.logging.Logger;

import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Polls the application's directories for changed, added or removed {@code .py} files. Polling
 * rather than inotify (WatchService) because inotify watches one directory at a time, runs out of
 * watches on large trees, and misses files that editors replace by renaming; a scan of an
 * application's sources each second costs a few milliseconds. Virtual environments, caches and
 * hidden directories are skipped, as uvicorn's reloader does.
 */
final class SourceWatcher implements AutoCloseable {
    private static final Logger LOG = Logger.getLogger("peregrine");
    private static final long INTERVAL_MILLIS = 1000;

    private final List<Path> roots;
    private final Runnable onChange;
    private final Thread thread;
    private volatile boolean closed;

    private SourceWatcher(List<Path> roots, Runnable onChange) {
        this.roots = roots;
        this.onChange = onChange;
        this.thread = new Thread(this::run, "source-watcher");
        thread.setDaemon(true);
    }

    static SourceWatcher start(List<Path> roots, Runnable onChange) {
        SourceWatcher watcher = new SourceWatcher(roots, onChange);
        watcher.thread.start();
        return watcher;
    }

    private void run() {
        Map<Path, Long> known = scan();
        while (!closed) {
            try {
                Thread.sleep(INTERVAL_MILLIS);
            } catch (InterruptedException e) {
                return;
            }
            Map<Path, Long> now = scan();
            if (!now.equals(known)) {
                for (Map.Entry<Path, Long> e : now.entrySet()) {
                    if (!e.getValue().equals(known.get(e.getKey()))) {
                        LOG.infof("Changed: %s", e.getKey());
                        break;
                    }
                }
                known = now;
                onChange.run();
            }
        }
    }

    private Map<Path, Long> scan() {
        Map<Path, Long> files = new HashMap<>();
        for (Path root : roots) {
            if (!Files.isDirectory(root)) continue;
            try {
                Files.walkFileTree(root, new SimpleFileVisitor<>() {
                    @Override
                    public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                        String name = dir.getFileName() == null ? "" : dir.getFileName().toString();
                        boolean skip = !dir.equals(root) && (name.startsWith(".") || name.equals("__pycache__")
                                || name.equals("node_modules") || name.equals("site-packages") || Files.exists(dir.resolve("pyvenv.cfg")));
                        return skip ? FileVisitResult.SKIP_SUBTREE : FileVisitResult.CONTINUE;
                    }

                    @Override
                    public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                        if (file.toString().endsWith(".py")) files.put(file, attrs.lastModifiedTime().toMillis() ^ (attrs.size() << 40));
                        return FileVisitResult.CONTINUE;
                    }

                    @Override
                    public FileVisitResult visitFileFailed(Path file, IOException e) {
                        return FileVisitResult.CONTINUE;
                    }
                });
            } catch (IOException e) {
                LOG.debugf("Cannot scan %s: %s", root, e.getMessage());
            }
        }
        return files;
    }

    @Override
    public void close() {
        closed = true;
        thread.interrupt();
    }
}
