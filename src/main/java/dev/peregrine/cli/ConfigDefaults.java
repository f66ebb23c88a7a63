package dev.peregrine.cli;

import org.eclipse.microprofile.config.Config;
import org.eclipse.microprofile.config.ConfigProvider;
import picocli.CommandLine.IDefaultValueProvider;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Supplies every option's value when the command line lacks it, from SmallRye Config: {@code -D} system
 * properties, then {@code PEREGRINE_*} environment variables, then {@code application.properties}. The
 * key of {@code --max-body} is {@code peregrine.max-body}, which the environment spells
 * {@code PEREGRINE_MAX_BODY}. Going through picocli's own default mechanism means a value from any
 * layer is converted and validated by the same code as one typed on the command line.
 */
public final class ConfigDefaults implements IDefaultValueProvider {
    private final Config config = ConfigProvider.getConfig();

    public static String key(OptionSpec option) {
        return "peregrine." + option.longestName().substring(2);
    }

    public static String environmentName(OptionSpec option) {
        return key(option).toUpperCase().replace('.', '_').replace('-', '_');
    }

    @Override
    public String defaultValue(ArgSpec argSpec) {
        if (!(argSpec instanceof OptionSpec option) || option.usageHelp() || option.versionHelp()) return null;
        return config.getOptionalValue(key(option), String.class).orElse(null);
    }

    /** True when the value of {@code option} came from configuration rather than the command line. */
    public boolean suppliedBy(OptionSpec option) {
        return config.getOptionalValue(key(option), String.class).isPresent();
    }
}
