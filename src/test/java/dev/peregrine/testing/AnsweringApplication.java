package dev.peregrine.testing;

import dev.peregrine.cli.CommandLineSettings;
import dev.peregrine.cli.PeregrineCommand;
import dev.peregrine.http.Application;
import dev.peregrine.http.BodyReceiver;
import dev.peregrine.http.HttpExchange;
import dev.peregrine.http.HttpSettings;
import dev.peregrine.http.ResponseHead;
import dev.peregrine.server.WorkerAssembly;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import picocli.CommandLine;

/**
 * The application the transport fuzz tests serve: reads each body to its end, then answers 200 "ok";
 * answers at once what has no body. Every request it sees ends unless the transport cuts it.
 */
public final class AnsweringApplication implements Application {
    /** The HTTP settings the command line {@code args} give, as the server would build them. */
    public static HttpSettings settings(String... args) {
        PeregrineCommand command = new PeregrineCommand((settings, workerOptions) -> 0);
        new CommandLine(command).parseArgs(args);
        return WorkerAssembly.httpSettings(CommandLineSettings.read(command));
    }

    @Override
    public void dispatch(HttpExchange exchange) {
        exchange.receiveBody(new BodyReceiver() {
            @Override
            public void onBody(ByteBuf data) {
                data.release();
                exchange.demand();
            }

            @Override
            public void onBodyEnd() {
                ResponseHead head = new ResponseHead(200);
                head.add("content-type", "text/plain");
                exchange.send(head, Unpooled.wrappedBuffer(new byte[] {'o', 'k'}), true);
            }

            @Override
            public void onDisconnect() {
            }
        });
        exchange.demand();
    }
}
