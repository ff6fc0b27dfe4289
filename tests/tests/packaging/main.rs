//! The shipped artefacts: the .deb, the systemd unit, the Kubernetes manifests, the man page, the rules and dashboards.
//! One test binary, a module per subject (a binary per file linked all of
//! `pptune` once each).

mod packaging_deb;
mod packaging_kubernetes;
mod packaging_manpage;
mod packaging_observability;
mod packaging_systemd;
