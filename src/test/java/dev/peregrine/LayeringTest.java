package dev.peregrine;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchRule;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.Arrays;
import java.util.stream.Stream;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;

/**
 * The package map of docs/ARCHITECTURE.md, enforced on the server's classes: each layer uses only the
 * layers below it, no two packages depend on each other in a cycle, and the few rules that keep the
 * seams where they are. A change that breaks one fails here with the offending dependency named.
 */
class LayeringTest {
    private static final String[] TRANSPORTS = {"dev.peregrine.http1..", "dev.peregrine.http2..", "dev.peregrine.http3.."};
    private static final String[] EDGE_FEATURES = {"dev.peregrine.edge.files..", "dev.peregrine.edge.compress..",
            "dev.peregrine.edge.ratelimit..", "dev.peregrine.edge.cache.."};
    private static JavaClasses classes;

    @BeforeAll
    static void importServerClasses() {
        classes = new ClassFileImporter()
                .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
                .importPackages("dev.peregrine");
    }

    @Test
    void noCycleBetweenPackages() {
        // Each package its own slice: edge and edge.cache are two, so a cycle between them shows.
        slices().matching("dev.peregrine.(**)").should().beFreeOfCycles().check(classes);
    }

    @Test
    void eachLayerUsesOnlyTheLayersBelowIt() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("entry").definedBy("dev.peregrine", "dev.peregrine.cli..")
                .layer("assembly").definedBy("dev.peregrine.server..")
                .layer("supervisor").definedBy("dev.peregrine.workers..")
                .layer("transports").definedBy(TRANSPORTS)
                .layer("adapters").definedBy("dev.peregrine.asgi..", "dev.peregrine.wsgi..")
                .layer("edge").definedBy("dev.peregrine.edge..", "dev.peregrine.accesslog")
                .layer("sessions").definedBy("dev.peregrine.websocket..", "dev.peregrine.webtransport..", "dev.peregrine.app..", "dev.peregrine.tls..", "dev.peregrine.acme..")
                .layer("core").definedBy("dev.peregrine.http")
                .layer("foundation").definedBy("dev.peregrine.python..", "dev.peregrine.metrics..", "dev.peregrine.shared..", "dev.peregrine.store..")
                .layer("config").definedBy("dev.peregrine.config..")
                .whereLayer("entry").mayNotBeAccessedByAnyLayer()
                .whereLayer("assembly").mayOnlyBeAccessedByLayers("entry")
                .whereLayer("supervisor").mayOnlyBeAccessedByLayers("entry", "assembly")
                .whereLayer("transports").mayOnlyBeAccessedByLayers("assembly")
                .whereLayer("adapters").mayOnlyBeAccessedByLayers("assembly")
                .whereLayer("edge").mayOnlyBeAccessedByLayers("assembly")
                .whereLayer("sessions").mayOnlyBeAccessedByLayers("entry", "assembly", "supervisor", "transports", "adapters")
                .whereLayer("core").mayOnlyBeAccessedByLayers("assembly", "transports", "adapters", "edge", "sessions")
                .whereLayer("foundation").mayOnlyBeAccessedByLayers("assembly", "supervisor", "transports", "adapters", "edge", "sessions", "core")
                .check(classes);
    }

    @Test
    void configurationImportsNoOtherPeregrinePackage() {
        noClasses().that().resideInAPackage("dev.peregrine.config..")
                .should().dependOnClassesThat(DescribedPredicate.describe("are in another Peregrine package",
                        c -> c.getPackageName().startsWith("dev.peregrine") && !c.getPackageName().startsWith("dev.peregrine.config")))
                .check(classes);
    }

    @ParameterizedTest
    @ValueSource(strings = {"dev.peregrine.http1..", "dev.peregrine.http2..", "dev.peregrine.http3.."})
    void noTransportImportsAnother(String transport) {
        String[] others = Arrays.stream(TRANSPORTS).filter(other -> !other.equals(transport)).toArray(String[]::new);
        noClasses().that().resideInAPackage(transport).should().dependOnClassesThat().resideInAnyPackage(others).check(classes);
    }

    @Test
    void thePythonBridgeImportsNoTransport() {
        ArchRule rule = noClasses().that().resideInAPackage("dev.peregrine.python..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.peregrine.http..", "dev.peregrine.http1..",
                        "dev.peregrine.http2..", "dev.peregrine.http3..", "dev.peregrine.websocket..", "dev.peregrine.webtransport..",
                        "dev.peregrine.server..");
        rule.check(classes);
    }

    @Test
    void theAdaptersSeeOnlyTheRequestCore() {
        noClasses().that().resideInAnyPackage("dev.peregrine.asgi..", "dev.peregrine.wsgi..")
                .should().dependOnClassesThat().resideInAnyPackage("dev.peregrine.http1..", "dev.peregrine.http2..",
                        "dev.peregrine.http3..", "dev.peregrine.server..", "dev.peregrine.edge..", "dev.peregrine.tls..",
                        "dev.peregrine.workers..", "dev.peregrine.cli..", "dev.peregrine.accesslog")
                .check(classes);
    }

    /** Each edge feature is one package that knows only the seam (dev.peregrine.edge): the chain alone puts them in order. */
    @ParameterizedTest
    @ValueSource(strings = {"dev.peregrine.edge.files..", "dev.peregrine.edge.compress..", "dev.peregrine.edge.ratelimit..",
            "dev.peregrine.edge.cache.."})
    void noEdgeFeatureImportsAnother(String feature) {
        String[] others = Stream.concat(Arrays.stream(EDGE_FEATURES).filter(other -> !other.equals(feature)),
                Stream.of("dev.peregrine.edge.chain..")).toArray(String[]::new);
        noClasses().that().resideInAPackage(feature).should().dependOnClassesThat().resideInAnyPackage(others).check(classes);
    }
}
