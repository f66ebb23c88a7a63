"""The deployment files agree with the server and with each other.

k8s/: the kinds and API versions, selectors that match the pods, probes on the health path and the
application port, scraping on the metrics port, a grace period that covers the drain delay and the
graceful timeout. deploy/Containerfile: a final stage that installs the wheel of bin/build-wheel (and
no JDK) and runs its peregrine command as a non-root user, stopped with SIGTERM.
deploy/peregrine.service with deploy/peregrine.env: reload by SIGHUP, a stop timeout that covers the
drain. Every PEREGRINE_* variable these files set must name an option that `bin/peregrine --help`
lists (or a variable a launcher itself reads) and hold a value of that option's kind, so a renamed
option or a typo fails here rather than in a cluster."""

import json
import re
import shlex

import pytest

from conftest import REPO_ROOT, run_cli

pytestmark = pytest.mark.peregrine_only

K8S = REPO_ROOT / "k8s"
DEPLOY = REPO_ROOT / "deploy"

# What a stop may take past drain delay + graceful timeout: the ASGI lifespan shutdown and the JVM's exit.
STOP_MARGIN_MS = 5000

EXPECTED_MANIFESTS = {
    "configmap.yaml": ("v1", "ConfigMap"),
    "deployment.yaml": ("apps/v1", "Deployment"),
    "service.yaml": ("v1", "Service"),
    "pdb.yaml": ("policy/v1", "PodDisruptionBudget"),
    "hpa.yaml": ("autoscaling/v2", "HorizontalPodAutoscaler"),
    "servicemonitor.yaml": ("monitoring.coreos.com/v1", "ServiceMonitor"),
    "kustomization.yaml": ("kustomize.config.k8s.io/v1beta1", "Kustomization"),
}

# Labels of --help whose option takes a whole number.
INTEGER_LABELS = {"N", "MS", "PORT", "BYTES", "SECONDS", "MIB", "KIB"}


# ---------------------------------------------------------------------------
# What the server accepts


@pytest.fixture(scope="module")
def options():
    """{--name: value label, or None for a flag}, as `bin/peregrine --help` lists them."""
    code, out = run_cli("--help")
    assert code == 0, out
    found = {}
    for match in re.finditer(r"^\s+(?:-\w, )?(--[a-z0-9-]+)(?:=(\S+))?", out, re.MULTILINE):
        found[match.group(1)] = match.group(2)
    for meta in ("--help", "--version"):
        assert meta in found, out
        del found[meta]
    assert found.get("--port") == "PORT" and "--access-log" in found and found["--access-log"] is None, out
    return found


def environment_name(option):
    return "PEREGRINE_" + option[2:].upper().replace("-", "_")


@pytest.fixture(scope="module")
def variables(options):
    """{PEREGRINE_NAME: value label or None} for every option."""
    return {environment_name(option): label for option, label in options.items()}


@pytest.fixture(scope="module")
def launcher_variables():
    """The PEREGRINE_* variables the launchers read themselves (JVM options, where JDKs are): bin/peregrine
    and the pip package's command."""
    names = set()
    for launcher in (REPO_ROOT / "bin" / "peregrine", REPO_ROOT / "src" / "main" / "python" / "peregrine" / "_launcher.py"):
        found = set(re.findall(r"\bPEREGRINE_[A-Z_]+\b", launcher.read_text()))
        assert "PEREGRINE_JAVA_OPTS" in found, launcher
        names |= found
    return names


def defaults():
    """The options' defaults, where each is declared (on the option, in PeregrineCommand), by environment name."""
    text = (REPO_ROOT / "src" / "main" / "java" / "dev" / "peregrine" / "cli" / "PeregrineCommand.java").read_text()
    found = {environment_name(option): value
             for option, value in re.findall(r'names = "(--[a-z0-9-]+)", defaultValue = "([^"]*)"', text)}
    assert "PEREGRINE_GRACEFUL_TIMEOUT" in found
    return found


def effective(environment):
    """The settings a server started with `environment` runs with, by environment name."""
    settings = defaults()
    settings.update(environment)
    return settings


def milliseconds(settings, name):
    return int(settings.get(name, "0"))


def check_variables(source, environment, variables, launcher_variables):
    problems = []
    for name, value in environment.items():
        if not name.startswith("PEREGRINE_") or name in launcher_variables:
            continue
        if name not in variables:
            problems.append("%s: %s is no option of bin/peregrine --help" % (source, name))
            continue
        label = variables[name]
        if label is None:
            if value not in ("true", "false"):
                problems.append("%s: %s is a flag: true or false, not %r" % (source, name, value))
        elif label in INTEGER_LABELS:
            if not re.fullmatch(r"\d+", value):
                problems.append("%s: %s takes a whole number (%s), not %r" % (source, name, label, value))
        elif "|" in label and value not in label.split("|"):
            problems.append("%s: %s takes one of %s, not %r" % (source, name, label, value))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------
# Kubernetes


@pytest.fixture(scope="module")
def k8s():
    yaml = pytest.importorskip("yaml")
    manifests = {}
    for path in sorted(K8S.glob("*.yaml")):
        documents = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert len(documents) == 1, "%s: one object per file" % path.name
        manifests[path.name] = documents[0]
    return manifests


@pytest.fixture(scope="module")
def config(k8s):
    return k8s["configmap.yaml"]["data"]


@pytest.fixture(scope="module")
def pod(k8s):
    return k8s["deployment.yaml"]["spec"]["template"]


@pytest.fixture(scope="module")
def container(pod):
    containers = pod["spec"]["containers"]
    assert len(containers) == 1, "one container: Peregrine"
    return containers[0]


def container_port(container, port):
    """The number a probe's or a Service's port refers to, by name or by number."""
    if isinstance(port, int):
        assert port in [p["containerPort"] for p in container["ports"]], port
        return port
    named = [p["containerPort"] for p in container["ports"] if p.get("name") == port]
    assert named, "the container has no port named %r" % port
    return named[0]


def is_subset(selector, labels):
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def test_manifest_kinds(k8s):
    assert set(k8s) == set(EXPECTED_MANIFESTS)
    for name, (api_version, kind) in EXPECTED_MANIFESTS.items():
        assert (k8s[name]["apiVersion"], k8s[name]["kind"]) == (api_version, kind), name
        assert "namespace" not in k8s[name].get("metadata", {}), "%s names a namespace" % name
        assert "namespace" not in k8s[name], "%s names a namespace" % name


def test_kustomization_lists_the_manifests(k8s):
    # The ServiceMonitor stays out: applying it fails on a cluster without the Prometheus Operator.
    listed = k8s["kustomization.yaml"]["resources"]
    assert sorted(listed) == sorted(set(EXPECTED_MANIFESTS) - {"kustomization.yaml", "servicemonitor.yaml"})


def test_selectors_match_the_pods(k8s, pod):
    pod_labels = pod["metadata"]["labels"]
    deployment = k8s["deployment.yaml"]
    service = k8s["service.yaml"]
    assert is_subset(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    assert is_subset(service["spec"]["selector"], pod_labels)
    assert is_subset(k8s["pdb.yaml"]["spec"]["selector"]["matchLabels"], pod_labels)
    for constraint in pod["spec"].get("topologySpreadConstraints", []):
        assert is_subset(constraint["labelSelector"]["matchLabels"], pod_labels)
    target = k8s["hpa.yaml"]["spec"]["scaleTargetRef"]
    assert target == {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment["metadata"]["name"]}
    # A ServiceMonitor selects Services, not pods.
    assert is_subset(k8s["servicemonitor.yaml"]["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])


def test_the_container_takes_the_configmap(k8s, pod, container):
    sources = [s["configMapRef"]["name"] for s in container.get("envFrom", []) if "configMapRef" in s]
    assert k8s["configmap.yaml"]["metadata"]["name"] in sources
    # Service links would add NAME_PORT=tcp://... variables, which for a Service named "peregrine"
    # would override PEREGRINE_PORT.
    assert pod["spec"]["enableServiceLinks"] is False


def test_configmap_variables_are_options(config, variables, launcher_variables):
    assert all(isinstance(value, str) for value in config.values()), "ConfigMap values must be strings"
    check_variables("k8s/configmap.yaml", config, variables, launcher_variables)
    for needed in ("PEREGRINE_HOST", "PEREGRINE_PORT", "PEREGRINE_HEALTH_CHECK_PATH", "PEREGRINE_METRICS_PORT",
                   "PEREGRINE_DRAIN_DELAY", "PEREGRINE_GRACEFUL_TIMEOUT"):
        assert needed in config, needed
    assert config["PEREGRINE_HOST"] == "0.0.0.0", "the Service reaches the pod on its own address, not loopback"


@pytest.mark.parametrize("probe", ["startupProbe", "readinessProbe", "livenessProbe"])
def test_probes_ask_the_health_path_on_the_application_port(config, container, probe):
    check = container[probe]["httpGet"]
    assert check["path"] == config["PEREGRINE_HEALTH_CHECK_PATH"]
    assert container_port(container, check["port"]) == int(config["PEREGRINE_PORT"])
    assert check.get("scheme", "HTTP") == "HTTP"


def test_liveness_outlasts_readiness_and_a_drain(config, container):
    def failing_for(probe):
        return container[probe]["periodSeconds"] * container[probe].get("failureThreshold", 3)

    assert failing_for("livenessProbe") > failing_for("readinessProbe")
    # The health path answers 503 on purpose while draining: liveness must not restart the pod for it.
    settings = effective(config)
    drain = milliseconds(settings, "PEREGRINE_DRAIN_DELAY") + milliseconds(settings, "PEREGRINE_GRACEFUL_TIMEOUT")
    assert failing_for("livenessProbe") * 1000 > drain


def test_grace_period_covers_the_drain(config, pod):
    settings = effective(config)
    needed = (milliseconds(settings, "PEREGRINE_DRAIN_DELAY") + milliseconds(settings, "PEREGRINE_GRACEFUL_TIMEOUT")
              + STOP_MARGIN_MS)
    assert pod["spec"]["terminationGracePeriodSeconds"] * 1000 >= needed


def test_service_reaches_the_application_and_metrics_ports(k8s, config, container):
    ports = {p["name"]: container_port(container, p["targetPort"]) for p in k8s["service.yaml"]["spec"]["ports"]}
    assert ports["http"] == int(config["PEREGRINE_PORT"])
    assert ports["metrics"] == int(config["PEREGRINE_METRICS_PORT"])


def test_scraping_uses_the_metrics_port(k8s, config, pod, container):
    metrics_port = int(config["PEREGRINE_METRICS_PORT"])
    annotations = pod["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert container_port(container, int(annotations["prometheus.io/port"])) == metrics_port
    assert annotations["prometheus.io/path"] == "/metrics"

    service_ports = {p["name"]: p for p in k8s["service.yaml"]["spec"]["ports"]}
    endpoints = k8s["servicemonitor.yaml"]["spec"]["endpoints"]
    assert endpoints
    for endpoint in endpoints:
        assert endpoint["path"] == "/metrics"
        assert container_port(container, service_ports[endpoint["port"]]["targetPort"]) == metrics_port


# ---------------------------------------------------------------------------
# k8s/shared-store/: the overlay whose replicas share through Valkey

SHARED = K8S / "shared-store"


@pytest.fixture(scope="module")
def shared():
    """{file name: [objects]} of k8s/shared-store/."""
    yaml = pytest.importorskip("yaml")
    return {path.name: [d for d in yaml.safe_load_all(path.read_text()) if d is not None] for path in sorted(SHARED.glob("*.yaml"))}


def test_the_overlay_adds_valkey_to_the_application_and_patches_it(shared, k8s):
    kustomization = shared["kustomization.yaml"][0]
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["resources"] == ["../", "valkey.yaml"]
    patched = [patch["path"] for patch in kustomization["patches"]]
    assert sorted(patched) == ["configmap-patch.yaml", "deployment-patch.yaml"]
    configmap = shared["configmap-patch.yaml"][0]
    assert (configmap["kind"], configmap["metadata"]["name"]) == ("ConfigMap", k8s["configmap.yaml"]["metadata"]["name"])
    deployment = shared["deployment-patch.yaml"][0]
    assert (deployment["kind"], deployment["metadata"]["name"]) == ("Deployment", k8s["deployment.yaml"]["metadata"]["name"])
    base_container = k8s["deployment.yaml"]["spec"]["template"]["spec"]["containers"][0]["name"]
    assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == [base_container]


def test_the_overlay_settings_are_options_and_reach_the_valkey_service(shared, variables, launcher_variables):
    config = shared["configmap-patch.yaml"][0]["data"]
    check_variables("k8s/shared-store/configmap-patch.yaml", config, variables, launcher_variables)
    assert "PEREGRINE_RATE_LIMIT" in config and "PEREGRINE_CACHE_SIZE" in config
    url = re.fullmatch(r"redis://([a-z0-9-]+):(\d+)/\d+", config["PEREGRINE_SHARED_STORE"])
    assert url, "no password in the URL: it comes from the Secret (%r)" % config["PEREGRINE_SHARED_STORE"]
    deployment, service = shared["valkey.yaml"]
    assert (deployment["kind"], service["kind"]) == ("Deployment", "Service")
    assert service["metadata"]["name"] == url.group(1)
    assert [p["port"] for p in service["spec"]["ports"]] == [int(url.group(2))]
    assert is_subset(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert is_subset(deployment["spec"]["selector"]["matchLabels"], deployment["spec"]["template"]["metadata"]["labels"])


def test_valkey_and_peregrine_read_one_secret_and_valkey_keeps_nothing(shared):
    app_env = shared["deployment-patch.yaml"][0]["spec"]["template"]["spec"]["containers"][0]["env"]
    password = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in app_env}
    # The variable the server reads its password from (CommandLineSettings.SHARED_STORE_PASSWORD).
    assert list(password) == ["PEREGRINE_SHARED_STORE_PASSWORD"]
    source = (REPO_ROOT / "src/main/java/dev/peregrine/cli/CommandLineSettings.java").read_text()
    assert '"PEREGRINE_SHARED_STORE_PASSWORD"' in source
    valkey = shared["valkey.yaml"][0]["spec"]["template"]["spec"]["containers"][0]
    valkey_env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in valkey["env"]}
    args = valkey["args"]
    expanded = args[args.index("--requirepass") + 1]
    assert re.fullmatch(r"\$\((\w+)\)", expanded) and valkey_env[expanded[2:-1]] == password["PEREGRINE_SHARED_STORE_PASSWORD"]
    assert args[args.index("--save") + 1] == "" and args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory-policy") + 1] in ("volatile-lru", "allkeys-lru")


def test_resources_and_scaling(k8s, container):
    requests = container["resources"]["requests"]
    assert "cpu" in requests and "memory" in requests
    assert "memory" in container["resources"]["limits"]
    hpa = k8s["hpa.yaml"]["spec"]
    # Utilization is measured against the request, so the HPA needs the CPU request above.
    assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["metrics"])
    # With one pod evicted at a time (the PDB), at least one other keeps serving.
    assert k8s["pdb.yaml"]["spec"]["maxUnavailable"] < hpa["minReplicas"] <= hpa["maxReplicas"]
    # The HPA owns the replica count; a count in the Deployment would reset it on every apply.
    assert "replicas" not in k8s["deployment.yaml"]["spec"]


# ---------------------------------------------------------------------------
# The container image


def dockerfile_instructions(text):
    """[(INSTRUCTION, arguments)] with continuation lines joined and comments dropped."""
    instructions = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):  # Docker drops these inside continuations too
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = pending + stripped
        pending = ""
        keyword, _, arguments = full.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def stages(instructions):
    """[(FROM arguments, [instructions])], one per stage."""
    found = []
    for keyword, arguments in instructions:
        if keyword == "FROM":
            found.append((arguments, []))
        elif found:
            found[-1][1].append((keyword, arguments))
    return found


def environment_of(instructions):
    environment = {}
    for keyword, arguments in instructions:
        if keyword == "ENV":
            for word in shlex.split(arguments):
                name, _, value = word.partition("=")
                environment[name] = value
    return environment


@pytest.fixture(scope="module")
def image_stages():
    return stages(dockerfile_instructions((DEPLOY / "Containerfile").read_text()))


def test_image_installs_the_wheel_and_no_jdk(image_stages):
    *builders, (base, final) = image_stages
    assert builders, "a build stage builds the wheel"
    build_base, build = builders[0]
    stage_name = build_base.split()[-1]
    assert any(k == "COPY" and "bin/build-wheel" in a for k, a in build)
    assert any(k == "RUN" and "bin/build-wheel" in a for k, a in build)
    assert any(k == "COPY" and "--from=%s" % stage_name in a and "target/wheels" in a for k, a in final)
    assert base.startswith("python:${PYTHON_VERSION}")
    assert any(k == "RUN" and re.search(r"pip install .*peregrine_server-\*\.whl", a) for k, a in final)
    # The wheel carries the Java runtime: nothing else brings one, nor points at one.
    assert not any(k == "COPY" and re.search(r"--from=\S*(temurin|jdk|jre|openjdk)", a) for k, a in final)
    assert "JAVA_HOME" not in environment_of(final)
    # Everything the wheel's build reads is let into the build context.
    allowed = (DEPLOY / "Containerfile.dockerignore").read_text().splitlines()
    for needed in ("mvnw", "pom.xml", "src/main", "src/test/python/apps/raw_asgi.py", "bin/build-wheel",
                   "bin/jvm-options"):
        assert "!" + needed in allowed, needed


def test_containerfile_final_stage_declares_a_non_root_user_sigterm_an_exec_entrypoint_and_the_served_port(image_stages, variables, launcher_variables):
    _, final = image_stages[-1]
    users = [a for k, a in final if k == "USER"]
    assert users, "the final stage sets a USER"
    assert users[-1].split(":")[0] not in ("root", "0")
    assert [a for k, a in final if k == "STOPSIGNAL"] == ["SIGTERM"]
    entrypoints = [a for k, a in final if k == "ENTRYPOINT"]
    assert entrypoints, "the final stage has an ENTRYPOINT"
    entrypoint = json.loads(entrypoints[-1])  # exec form: signals reach the server, not a shell
    assert any(word.endswith("bin/peregrine") for word in entrypoint), entrypoint

    environment = environment_of(final)
    check_variables("deploy/Containerfile", environment, variables, launcher_variables)
    settings = effective(environment)
    exposed = [port.split("/")[0] for k, a in final if k == "EXPOSE" for port in a.split()]
    assert settings["PEREGRINE_PORT"] in exposed
    assert settings["PEREGRINE_HOST"] == "0.0.0.0", "published ports reach the container's own address"


# ---------------------------------------------------------------------------
# systemd


def unit_settings(text):
    """{Section: {Key: [values]}} of a systemd unit."""
    sections = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def environment_file(path):
    environment = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        name, _, value = line.partition("=")
        environment[name.strip()] = value.strip().strip("'\"")
    return environment


@pytest.fixture(scope="module")
def unit():
    return unit_settings((DEPLOY / "peregrine.service").read_text())["Service"]


@pytest.fixture(scope="module")
def unit_environment():
    return environment_file(DEPLOY / "peregrine.env")


def test_env_file_variables_are_options(unit_environment, variables, launcher_variables):
    assert any(name.startswith("PEREGRINE_") for name in unit_environment)
    check_variables("deploy/peregrine.env", unit_environment, variables, launcher_variables)


def test_unit_runs_peregrine_with_the_env_file(unit):
    assert shlex.split(unit["ExecStart"][-1])[0].endswith("bin/peregrine")
    assert unit["EnvironmentFile"], "the PEREGRINE_* values come from an EnvironmentFile"
    assert unit["Restart"] == ["on-failure"]
    user = unit.get("User", ["root"])[-1]
    assert user not in ("root", "0")


def test_unit_reloads_with_sighup_and_stops_with_sigterm(unit):
    assert re.fullmatch(r"\S*kill\s+-(s\s+)?(SIG)?HUP\s+\$MAINPID", unit["ExecReload"][-1]), unit["ExecReload"]
    assert unit["KillSignal"] == ["SIGTERM"]
    # The main process drains its workers; systemd must not signal them all at once.
    assert unit["KillMode"] == ["mixed"]
    # The JIT and the FFM upcall stubs write machine code.
    assert unit.get("MemoryDenyWriteExecute", ["no"])[-1] not in ("yes", "true", "1", "on")


def test_unit_stop_timeout_covers_the_drain(unit, unit_environment):
    timeout = re.fullmatch(r"(\d+)s?", unit["TimeoutStopSec"][-1])
    assert timeout, "TimeoutStopSec in whole seconds: %s" % unit["TimeoutStopSec"]
    settings = effective(unit_environment)
    needed = (milliseconds(settings, "PEREGRINE_DRAIN_DELAY") + milliseconds(settings, "PEREGRINE_GRACEFUL_TIMEOUT")
              + STOP_MARGIN_MS)
    assert int(timeout.group(1)) * 1000 >= needed


def test_a_server_started_with_the_configmap_serves_probes_and_metrics(config, start_server):
    """The ConfigMap's settings, given only as environment variables, run a real server: the probe
    path answers, Prometheus can scrape, the access log is JSON on stdout, and SIGTERM fails the
    probe while requests are still served. Ports and the drain delay are shrunk to fit a test."""
    import signal as _signal

    import httpx

    from conftest import free_port, poll

    env = dict(config)
    port, metrics_port = free_port(), free_port()
    env.update({"PEREGRINE_HOST": "127.0.0.1", "PEREGRINE_PORT": str(port), "PEREGRINE_METRICS_PORT": str(metrics_port),
                "PEREGRINE_DRAIN_DELAY": "2000"})
    server = start_server("workers_app:app", env=env, ready_port=port)
    health = config["PEREGRINE_HEALTH_CHECK_PATH"]
    workers = int(config["PEREGRINE_WORKERS"])
    assert poll(lambda: "with %d workers" % workers in server.output(), timeout=60), server.output()[-3000:]
    assert httpx.get(server.url + health, timeout=10).status_code == 200
    assert httpx.get(server.url + "/pid", timeout=10).status_code == 200
    scrape = httpx.get("http://127.0.0.1:%d/metrics" % metrics_port, timeout=10)
    assert scrape.status_code == 200 and "peregrine_requests_total" in scrape.text
    assert poll(lambda: any(line.startswith("{") and json.loads(line).get("path") == "/pid"
                            for line in server.lines()), timeout=10)
    server.proc.send_signal(_signal.SIGTERM)
    assert poll(lambda: httpx.get(server.url + health, timeout=5).status_code == 503, timeout=5)
    assert httpx.get(server.url + "/pid", timeout=5).status_code == 200
    assert server.wait_exit(60) == 0
