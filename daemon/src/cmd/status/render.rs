//! `pptune status`'s text: the report as a person reads it (the JSON
//! is the report itself, serialized).

use std::fmt::Write as _;

use policy::snapshot::{Channels, MemoryProvider, OperState, QueueStats, Rings};

use super::report::{InterfaceView, PoolView, Report};

/// The report as text ([`Report::render_text`]).
#[must_use]
pub(super) fn text(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "kernel {} · {}",
        r.kernel_release,
        r.capabilities.summary.join(" · ")
    );
    for m in &r.missing_interfaces {
        let _ = writeln!(o, "\nno interface named {m} in this network namespace");
    }
    if r.interfaces.is_empty() && r.missing_interfaces.is_empty() {
        let _ = writeln!(
            o,
            "\nno network interfaces to show (only loopback exists, or none matched)"
        );
    }
    for i in &r.interfaces {
        render_interface(&mut o, i);
    }
    if let Some(r) = &r.reclaimable {
        let _ = write!(o, "\n{}", r.render());
    } else if let Some(why) = &r.reclaimable_not_computed {
        let _ = writeln!(o, "\nreclaimable ring memory: not computed: {why}");
    }
    let _ = writeln!(
        o,
        "\ndetached and orphaned pools (destroyed with pages still in flight):"
    );
    if r.detached_pools.is_empty() {
        let _ = writeln!(o, "  none");
    }
    for d in &r.detached_pools {
        let whose = match (d.orphaned, d.ifindex) {
            (true, _) => "orphaned (its device is gone)".to_owned(),
            (false, Some(i)) => format!("detached from ifindex {i}"),
            (false, None) => "detached".to_owned(),
        };
        let age = match (d.pool.detached_for_secs, d.pool.detach_time) {
            (Some(s), _) => format!("detached {} ago", human_secs(s)),
            (None, Some(t)) => format!("detached at boottime {t} s"),
            (None, None) => "detach time unknown".to_owned(),
        };
        let _ = writeln!(
            o,
            "  pool {}: {whose}, {}, {age}",
            d.pool.id,
            inflight(&d.pool)
        );
    }
    o
}

fn render_interface(o: &mut String, i: &InterfaceView) {
    let state = format!(
        "{}{}",
        oper_word(i.oper_state),
        if i.admin_up { "" } else { " (admin down)" }
    );
    let _ = writeln!(
        o,
        "\n{} (ifindex {}): driver {}, {}{}, mtu {}, id {}",
        i.name,
        i.ifindex,
        i.driver.as_deref().unwrap_or("unknown"),
        i.kind
            .as_deref()
            .map(|k| format!("kind {k}, "))
            .unwrap_or_default(),
        state,
        i.mtu.map_or("-".to_owned(), |m| m.to_string()),
        i.device_key,
    );
    let _ = match (&i.rings.value, &i.rings.reason) {
        (Some(r), _) => writeln!(o, "  rings:    {}", rings_text(r)),
        (None, Some(why)) => writeln!(o, "  rings:    unavailable — {why}"),
        _ => Ok(()),
    };
    let _ = match (&i.channels.value, &i.channels.reason) {
        (Some(c), _) => writeln!(o, "  channels: {}", channels_text(c)),
        (None, Some(why)) => writeln!(o, "  channels: unavailable — {why}"),
        _ => Ok(()),
    };
    let _ = writeln!(o, "  a miss:   {}", i.miss_cost.words());
    for w in &i.owners {
        let v = w
            .owner
            .value
            .map_or_else(|| "max".to_owned(), |v| v.to_string());
        let _ = writeln!(o, "  owner:    {} = {v} set by {}", w.knob, w.owner);
    }
    if let Some(l) = &i.link_stats {
        let _ = writeln!(
            o,
            "  link:     rx {} packets, {} bytes; dropped {}, missed {}, fifo {}",
            l.rx_packets, l.rx_bytes, l.rx_dropped, l.rx_missed_errors, l.rx_fifo_errors
        );
    }
    if let Some(q) = &i.qstats {
        let _ = writeln!(o, "  qstats:   {}", qstats_text(q));
    }
    if !i.rx_queues.is_empty() {
        let _ = writeln!(
            o,
            "  RX queues: {} active{}",
            i.rx_queues.len(),
            i.num_rx_queues_allocated
                .map(|n| format!(" of {n} allocated"))
                .unwrap_or_default()
        );
    }
    for q in &i.rx_queues {
        let _ = writeln!(
            o,
            "    queue {:<3} napi {}{}{}",
            q.id,
            q.napi_id.map_or("-".to_owned(), |n| n.to_string()),
            q.provider
                .map(|p| format!("  provider {}", provider_text(&p)))
                .unwrap_or_default(),
            // Per queue, only the harm counters, and only where reported
            // (the device line already says what the driver lacks).
            q.qstats
                .filter(|s| {
                    s.rx_alloc_fail.is_some()
                        || s.rx_hw_drops.is_some()
                        || s.rx_hw_drop_overruns.is_some()
                })
                .map(|s| format!("  qstats {}", qstats_text(&s)))
                .unwrap_or_default(),
        );
        if q.pools.is_empty() {
            let _ = writeln!(o, "      no page pool mapped to this queue's NAPI");
        }
        for p in &q.pools {
            render_pool(o, p, "      ");
        }
    }
    if !i.unmapped_pools.is_empty() {
        let _ = writeln!(
            o,
            "  pools not mapped to an RX queue (no NAPI id, or one no queue reports):"
        );
        for p in &i.unmapped_pools {
            render_pool(o, p, "    ");
        }
    }
    for n in &i.notes {
        let _ = writeln!(o, "  note: {n}");
    }
}

fn render_pool(o: &mut String, p: &PoolView, ind: &str) {
    let _ = writeln!(
        o,
        "{ind}pool {}: {}{}",
        p.id,
        inflight(p),
        p.provider
            .map(|m| format!(", provider {}", provider_text(&m)))
            .unwrap_or_default()
    );
    match (&p.counters, &p.derived) {
        (Some(s), Some(d)) => {
            // One line per counter family (`alloc_*`, `recycle_*`), every
            // counter of the table, named as ynltool names them.
            for family in ["alloc", "recycle"] {
                let _ = write!(o, "{ind}  {family}:");
                for (name, v) in policy::counters::NAMES.iter().zip(s.values()) {
                    if let Some(short) = name.strip_prefix(family).and_then(|n| n.strip_prefix('_'))
                    {
                        let _ = write!(o, " {} {v}", short.replace('_', "-"));
                    }
                }
                o.push('\n');
            }
            let _ = writeln!(
                o,
                "{ind}  recycling {}, recycle-miss share {}, slow-refill share {}",
                pct(d.recycling_pct.map(|v| v / 100.0)),
                pct(d.recycle_miss_share),
                pct(d.slow_refill_share)
            );
        }
        _ => {
            let _ = writeln!(
                o,
                "{ind}  counters: unavailable (no page-pool stats in this kernel)"
            );
        }
    }
}

fn inflight(p: &PoolView) -> String {
    match (p.inflight_pages, p.inflight_bytes) {
        (Some(n), Some(b)) => format!("inflight {n} {} / {}", pages(n), crate::human::bytes(b)),
        (Some(n), None) => format!("inflight {n} {}", pages(n)),
        _ => "inflight unknown".to_owned(),
    }
}

fn pages(n: u64) -> &'static str {
    if n == 1 { "page" } else { "pages" }
}

/// A share (0..1) as a percentage; "no traffic" when undefined.
fn pct(v: Option<f64>) -> String {
    v.map_or("n/a (no traffic)".to_owned(), |v| {
        format!("{:.1}%", v * 100.0)
    })
}

fn human_secs(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

fn oper_word(s: OperState) -> &'static str {
    match s {
        OperState::Unknown => "state unknown",
        OperState::NotPresent => "not present",
        OperState::Down => "down",
        OperState::LowerLayerDown => "lower layer down",
        OperState::Testing => "testing",
        OperState::Dormant => "dormant",
        OperState::Up => "up",
    }
}

fn provider_text(p: &MemoryProvider) -> String {
    match p {
        MemoryProvider::Dmabuf { id } => format!("dmabuf (binding {id})"),
        MemoryProvider::IoUring {
            rx_buf_len: Some(l),
        } => format!("io_uring (rx-buf-len {l})"),
        MemoryProvider::IoUring { rx_buf_len: None } => "io_uring".to_owned(),
    }
}

fn pair(name: &str, cur: Option<u32>, max: Option<u32>) -> Option<String> {
    match (cur, max) {
        (Some(c), Some(m)) => Some(format!("{name} {c}/{m}")),
        (Some(c), None) => Some(format!("{name} {c}")),
        _ => None,
    }
}

fn rings_text(r: &Rings) -> String {
    let split = r.tcp_data_split.map(|t| {
        let word = match t {
            1 => "off",
            2 => "on",
            _ => "unknown",
        };
        format!("tcp-data-split {word}")
    });
    current_max(
        [
            pair("rx", r.rx, r.rx_max),
            pair("rx-mini", r.rx_mini, r.rx_mini_max),
            pair("rx-jumbo", r.rx_jumbo, r.rx_jumbo_max),
            pair("tx", r.tx, r.tx_max),
            r.rx_buf_len.map(|l| format!("rx-buf-len {l}")),
            split,
            pair("hds-thresh", r.hds_thresh, r.hds_thresh_max),
        ],
        "the driver reports no ring sizes (all maxima 0)",
    )
}

fn channels_text(c: &Channels) -> String {
    current_max(
        [
            pair("combined", c.combined, c.combined_max),
            pair("rx", c.rx, c.rx_max),
            pair("tx", c.tx, c.tx_max),
            pair("other", c.other, c.other_max),
        ],
        "the driver reports no channel counts (all maxima 0)",
    )
}

/// The values the driver reports of a block, as `rx 512/8192, tx …
/// (current/max)`; `none` when it reports none.
fn current_max<const N: usize>(parts: [Option<String>; N], none: &str) -> String {
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    if parts.is_empty() {
        none.to_owned()
    } else {
        format!("{} (current/max)", parts.join(", "))
    }
}

/// The qstats a person needs: alloc failures and hardware drops, naming
/// what the driver does not report rather than printing zeros.
fn qstats_text(q: &QueueStats) -> String {
    let mut parts = Vec::new();
    if let Some(p) = q.rx_packets {
        parts.push(format!("rx {p} packets"));
    }
    let named = [
        ("rx-alloc-fail", q.rx_alloc_fail),
        ("rx-hw-drops", q.rx_hw_drops),
        ("rx-hw-drop-overruns", q.rx_hw_drop_overruns),
    ];
    let missing: Vec<&str> = named
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(n, _)| *n)
        .collect();
    parts.extend(
        named
            .iter()
            .filter_map(|(n, v)| v.map(|v| format!("{n} {v}"))),
    );
    if !missing.is_empty() {
        parts.push(format!(
            "not reported by the driver: {}",
            missing.join(", ")
        ));
    }
    parts.join(", ")
}
