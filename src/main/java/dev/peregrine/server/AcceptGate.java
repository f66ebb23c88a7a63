package dev.peregrine.server;

import dev.peregrine.app.ServedApplication;
import dev.peregrine.shared.ConnectionShares;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import org.jboss.logging.Logger;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Whether a worker with siblings accepts, decided on its listener's own event loop. It does not while
 * its application is saturated (every WSGI thread taken, or the ASGI loop blocked), nor while it holds
 * clearly more than its share of the workers' connections ({@link ConnectionShares}). Either way the
 * next connections wait in the kernel's queue for a worker that accepts, never behind this one, and
 * setting auto-read off inside the accept loop stops that very loop.
 *
 * <p>A blocked loop tells nobody, hence a steady check besides the application's own signal; a pause
 * for the share is checked again every few milliseconds, as the other workers' counts change without
 * telling this one.
 *
 * <p>A pause for the application, and its end, are logged at debug level: which worker stopped taking
 * connections, and when, is what an operator asks first when one worker seems to get none.
 */
final class AcceptGate extends ChannelInboundHandlerAdapter {
    private static final long STEADY_CHECK_MILLIS = 100;
    private static final long SHARE_CHECK_MILLIS = 5;
    private static final Logger LOG = Logger.getLogger("peregrine");

    private final ServedApplication application;
    /** Null when the supervisor gave this worker no line to count in. */
    private final ConnectionShares shares;
    private final AtomicBoolean checkPending = new AtomicBoolean();
    private Channel listener;
    private boolean shareCheckScheduled;
    private boolean pausedForApplication;

    AcceptGate(ServedApplication application, ConnectionShares shares) {
        this.application = application;
        this.shares = shares;
    }

    /** Starts the checks once the listener is registered. */
    void attach(Channel listener) {
        this.listener = listener;
        application.onSaturationChange(() -> {
            // Changes that come while a check is pending share it: with one thread, every request is two.
            if (checkPending.compareAndSet(false, true)) listener.eventLoop().execute(this::check);
        });
        var steady = listener.eventLoop().scheduleAtFixedRate(this::check, STEADY_CHECK_MILLIS, STEADY_CHECK_MILLIS, TimeUnit.MILLISECONDS);
        listener.closeFuture().addListener(closed -> {
            steady.cancel(false);
            if (shares != null) shares.accepting(false);
        });
        listener.eventLoop().execute(this::check);
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object accepted) {
        if (shares != null && accepted instanceof Channel connection) {
            shares.opened();
            connection.closeFuture().addListener(closed -> shares.closed());
        }
        ctx.fireChannelRead(accepted);
        if (shares != null && shares.overShare()) check();
    }

    private void check() {
        checkPending.set(false);
        // Before attach (an adopted socket accepts as soon as it is registered), or after the listener closed.
        if (listener == null || !listener.isOpen()) return;
        boolean saturated = application.saturated();
        boolean overShare = !saturated && shares != null && shares.overShare();
        // A saturated worker leaves the sharing altogether, so that the others do not hold back for it.
        if (shares != null) shares.accepting(!saturated);
        listener.config().setAutoRead(!saturated && !overShare);
        if (saturated != pausedForApplication) {
            pausedForApplication = saturated;
            // Checked first: with one WSGI thread this changes twice per request.
            if (LOG.isDebugEnabled()) LOG.debugf(saturated ? "%sstops accepting: its application is busy" : "%saccepts again", WorkerServer.who());
        }
        if (overShare && !shareCheckScheduled) {
            shareCheckScheduled = true;
            listener.eventLoop().schedule(() -> {
                shareCheckScheduled = false;
                check();
            }, SHARE_CHECK_MILLIS, TimeUnit.MILLISECONDS);
        }
    }
}
