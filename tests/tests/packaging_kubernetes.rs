//! The Kubernetes manifests, read into the Kubernetes API types
//! (`k8s-openapi`): host network, root with every capability dropped but
//! NET_ADMIN, policy from the ConfigMap, metrics on the host address and
//! declared for scraping, host identity from the node name, state on the host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Namespace, PodSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/kubernetes")
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

#[test]
fn policy_comes_from_the_configmap_and_state_from_the_host() {
    let ds: DaemonSet = load("daemonset.yaml");
    let cm: ConfigMap = load("configmap.yaml");
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
    assert_eq!(cm_src.name, cm.metadata.name.clone().unwrap());
    let mount = mounts
        .iter()
        .find(|m| m.name == policy_vol.name)
        .expect("configMap volume mounted");
    assert_eq!(mount.read_only, Some(true));
    let items = cm_src.items.as_deref().unwrap_or_default();
    let item = items.first().expect("items");
    assert_eq!(config, format!("{}/{}", mount.mount_path, item.path));
    assert_eq!(env_value(c, "CONFIGURATION_DIRECTORY"), mount.mount_path);
    let data = cm.data.as_ref().expect("data");
    let policy = data.get(&item.key).expect("the policy key");
    // The same parser and validation `pptune check` uses.
    let parsed = config::parse_str("configmap.yaml#policy.yaml", policy)
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

    // Long enough to finish a change in progress and restore on stop.
    assert!(spec.termination_grace_period_seconds.unwrap_or(30) >= 60);
}

#[test]
fn namespace_and_kustomization_cover_every_manifest() {
    let ns: Namespace = load("namespace.yaml");
    let ds: DaemonSet = load("daemonset.yaml");
    let cm: ConfigMap = load("configmap.yaml");
    assert_eq!(ns.metadata.name, ds.metadata.namespace);
    assert_eq!(ns.metadata.name, cm.metadata.namespace);

    #[derive(serde::Deserialize)]
    struct Kustomization {
        resources: Vec<String>,
    }
    let k: Kustomization = serde_saphyr::from_str(&read("kustomization.yaml")).unwrap();
    let mut listed = k.resources;
    listed.sort();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml") && n != "kustomization.yaml")
        .collect();
    files.sort();
    assert_eq!(listed, files);
}
