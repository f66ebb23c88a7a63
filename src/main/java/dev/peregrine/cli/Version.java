package dev.peregrine.cli;

import picocli.CommandLine.IVersionProvider;

public final class Version implements IVersionProvider {
    public static final String VERSION = "0.1.0";

    @Override
    public String[] getVersion() {
        return new String[] {"peregrine " + VERSION};
    }
}
