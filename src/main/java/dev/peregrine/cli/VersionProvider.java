package dev.peregrine.cli;

import dev.peregrine.config.Version;
import picocli.CommandLine.IVersionProvider;

/** What --version prints. */
public final class VersionProvider implements IVersionProvider {
    @Override
    public String[] getVersion() {
        return new String[] {"peregrine " + Version.VERSION};
    }
}
