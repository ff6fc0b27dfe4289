//! Capture real kernel replies as test fixtures.
//!
//! `capture OUTDIR IFNAME [PREFIX]` runs in the current network namespace
//! (use `ip netns exec` or the VM testbed, never the host's interfaces) and
//! writes, for each exchange, `PREFIX<name>.bin` (every message the kernel
//! sent for it, verbatim, DONE/ERROR included) and `PREFIX<name>.req.bin`
//! (the request). Steps that the kernel refuses are still written (the
//! refusal is the fixture); steps that cannot run are reported and skipped.
//!
//! Extra steps, when the interface allows: a CHANNELS_SET that changes rx
//! (and the CHANNELS_NTF it causes, from a monitor socket), a RINGS_SET
//! above the maximum (an extack refusal), and napi-set of gro-flush-timeout
//! to 5 s so the following napi-get carries an 8-byte `uint`.
//!
//! `capture OUTDIR - PREFIX` only dumps page pools and their stats (for
//! states with no device to name: orphaned pools).
//! `capture OUTDIR - PREFIX watch SECS` records every netdev `page-pool`
//! notification for SECS seconds into `PREFIX<n>-netdev-page-pool-ntf.bin`.

use std::path::{Path, PathBuf};

use netlink::ethtool::{Channels, EthtoolMessage, Header, Rings};
use netlink::netdev::{Napi, NetdevMessage, QSTATS_SCOPE_QUEUE};
use netlink::socket::{Exchange, NETLINK_GENERIC, NotifySocket, Received};

fn write(dir: &Path, prefix: &str, name: &str, ex: &Exchange) -> std::io::Result<()> {
    std::fs::write(dir.join(format!("{prefix}{name}.bin")), ex.reply_bytes())?;
    std::fs::write(dir.join(format!("{prefix}{name}.req.bin")), &ex.request)?;
    println!("wrote {prefix}{name}: {} messages", ex.messages.len());
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(ifname)) = (args.next(), args.next()) else {
        eprintln!("usage: capture OUTDIR IFNAME [PREFIX]");
        std::process::exit(2);
    };
    let prefix = args.next().unwrap_or_default();
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let client = netlink::Client::connect().await?;
    if ifname == "-" {
        if args.next().as_deref() == Some("watch") {
            let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
            return watch_page_pools(&client, &dir, &prefix, secs).await;
        }
        for (name, msg) in [
            (
                "netdev-page-pool-get-dump",
                NetdevMessage::page_pool_get(None),
            ),
            (
                "netdev-page-pool-stats-get-dump",
                NetdevMessage::page_pool_stats_get(None),
            ),
        ] {
            let ex = client.netdev_exchange(&msg, true).await?;
            write(&dir, &prefix, name, &ex)?;
        }
        return Ok(());
    }
    let links = client.links().await?;
    let link = links
        .iter()
        .find(|l| l.name == ifname)
        .ok_or_else(|| format!("no interface {ifname} in this netns"))?;
    let ifindex = link.ifindex;
    let ex = client.links_exchange().await?;
    write(&dir, &prefix, "rtnl-getlink-dump", &ex)?;

    // nlctrl
    for fam in ["netdev", "ethtool"] {
        let req = netlink::ctrl::CtrlMessage::get_family(fam);
        let sock = netlink::socket::RequestSocket::open(NETLINK_GENERIC, "nlctrl")?;
        let ex = sock
            .exchange(
                netlink::ctrl::GENL_ID_CTRL,
                0,
                &netlink::GenlPayload::to_genl_bytes(&req),
            )
            .await?;
        write(&dir, &prefix, &format!("ctrl-getfamily-{fam}"), &ex)?;
    }

    // netdev dumps
    let dumps: [(&str, NetdevMessage); 6] = [
        (
            "netdev-queue-get-dump",
            NetdevMessage::queue_get(Some(ifindex)),
        ),
        (
            "netdev-napi-get-dump",
            NetdevMessage::napi_get(Some(ifindex), None),
        ),
        (
            "netdev-page-pool-get-dump",
            NetdevMessage::page_pool_get(None),
        ),
        (
            "netdev-page-pool-stats-get-dump",
            NetdevMessage::page_pool_stats_get(None),
        ),
        (
            "netdev-qstats-get-dev-dump",
            NetdevMessage::qstats_get(Some(ifindex), 0),
        ),
        (
            "netdev-qstats-get-queue-dump",
            NetdevMessage::qstats_get(Some(ifindex), QSTATS_SCOPE_QUEUE),
        ),
    ];
    for (name, msg) in dumps {
        match client.netdev_exchange(&msg, true).await {
            Ok(ex) => write(&dir, &prefix, name, &ex)?,
            Err(e) => println!("skip {name}: {e}"),
        }
    }
    // do-by-id of the first pool, if any
    let first_pool = client
        .page_pools()
        .await
        .ok()
        .and_then(|pools| pools.iter().find_map(|p| p.id));
    if let Some(id) = first_pool {
        let ex = client
            .netdev_exchange(&NetdevMessage::page_pool_get(Some(id)), false)
            .await?;
        write(&dir, &prefix, "netdev-page-pool-get-do", &ex)?;
    }
    // page-pool-get do without the required id: extack MISS_TYPE.
    let ex = client
        .netdev_exchange(&NetdevMessage::page_pool_get(None), false)
        .await?;
    write(&dir, &prefix, "netdev-page-pool-get-do-missing-id", &ex)?;
    // page-pool-stats-get dump filtered by info.id: refused, the extack
    // offset points inside the nest (.info.id).
    let ex = client
        .netdev_exchange(&NetdevMessage::page_pool_stats_get(Some(1)), true)
        .await?;
    write(
        &dir,
        &prefix,
        "netdev-page-pool-stats-get-dump-by-id-refused",
        &ex,
    )?;
    // page-pool-stats-get do selecting by ifindex: "selecting by ifindex
    // not supported".
    let by_ifindex = NetdevMessage {
        cmd: netlink::netdev::cmd::PAGE_POOL_STATS_GET,
        body: netlink::netdev::NetdevBody::PagePoolStats(netlink::netdev::PagePoolStats {
            info: Some(netlink::netdev::PagePoolInfo {
                ifindex: Some(ifindex),
                ..Default::default()
            }),
            ..Default::default()
        }),
    };
    let ex = client.netdev_exchange(&by_ifindex, false).await?;
    write(
        &dir,
        &prefix,
        "netdev-page-pool-stats-get-do-by-ifindex-refused",
        &ex,
    )?;

    // qstats as a do: refused with EOPNOTSUPP (dump-only op).
    let ex = client
        .netdev_exchange(&NetdevMessage::qstats_get(Some(ifindex), 0), false)
        .await?;
    write(&dir, &prefix, "netdev-qstats-get-do-refused", &ex)?;

    // ethtool gets
    let ex = client
        .ethtool_exchange(&EthtoolMessage::rings_get(Header::ifindex(ifindex)), false)
        .await?;
    write(&dir, &prefix, "ethtool-rings-get", &ex)?;
    let ex = client
        .ethtool_exchange(
            &EthtoolMessage::channels_get(Header::ifindex(ifindex)),
            false,
        )
        .await?;
    write(&dir, &prefix, "ethtool-channels-get", &ex)?;
    let ex = client
        .ethtool_exchange(
            &EthtoolMessage::linkmodes_get(Header::ifindex(ifindex)),
            false,
        )
        .await?;
    write(&dir, &prefix, "ethtool-linkmodes-get", &ex)?;

    // RINGS_SET above the maximum (or on a driver without rings): a refusal.
    let rings = client.rings(ifindex, Some(&ifname)).await.ok();
    let too_big = rings
        .as_ref()
        .and_then(|r| r.rx_max)
        .map_or(4096, |m| m.saturating_add(1));
    let ex = client
        .ethtool_exchange(
            &EthtoolMessage::rings_set(Rings {
                header: Some(Header::ifindex(ifindex)),
                rx: Some(too_big),
                ..Rings::default()
            }),
            false,
        )
        .await?;
    write(&dir, &prefix, "ethtool-rings-set-refused", &ex)?;

    // CHANNELS_SET changing rx (or combined), and the NTF it emits.
    if let Ok(ch) = client.channels(ifindex, Some(&ifname)).await {
        let eth = client.ethtool_family().ok_or("no ethtool family")?;
        let group = eth.group("monitor").ok_or("no monitor group")?;
        let mut mon = NotifySocket::open(NETLINK_GENERIC, "monitor", &[group])?;
        let mut set = Channels {
            header: Some(Header::ifindex(ifindex)),
            ..Channels::default()
        };
        let flip = |cur: Option<u32>, max: Option<u32>| match (cur, max) {
            (Some(c), Some(m)) if m > 1 => Some(if c > 1 { c - 1 } else { c + 1 }),
            _ => None,
        };
        if let Some(v) = flip(ch.combined_count, ch.combined_max) {
            set.combined_count = Some(v);
        } else if let Some(v) = flip(ch.rx_count, ch.rx_max) {
            set.rx_count = Some(v);
        }
        if set.combined_count.is_some() || set.rx_count.is_some() {
            let ex = client
                .ethtool_exchange(&EthtoolMessage::channels_set(set.clone()), false)
                .await?;
            write(&dir, &prefix, "ethtool-channels-set-ack", &ex)?;
            let got = tokio::time::timeout(std::time::Duration::from_secs(2), mon.recv()).await;
            if let Ok(Ok(Received::Messages(msgs))) = got {
                std::fs::write(
                    dir.join(format!("{prefix}ethtool-channels-ntf.bin")),
                    msgs.concat(),
                )?;
                println!("wrote {prefix}ethtool-channels-ntf");
            }
            // restore
            let restore = Channels {
                header: Some(Header::ifindex(ifindex)),
                combined_count: set_back(set.combined_count, ch.combined_count),
                rx_count: set_back(set.rx_count, ch.rx_count),
                ..Channels::default()
            };
            client.set_channels(restore, Some(&ifname)).await?;
        }
        // A count above the maximum: extack refusal naming the attribute.
        let over = Channels {
            header: Some(Header::ifindex(ifindex)),
            rx_count: ch.rx_max.map(|m| m + 1),
            combined_count: ch.combined_max.map(|m| m + 1),
            ..Channels::default()
        };
        let ex = client
            .ethtool_exchange(&EthtoolMessage::channels_set(over), false)
            .await?;
        write(&dir, &prefix, "ethtool-channels-set-refused", &ex)?;
    }

    // napi-set gro-flush-timeout 5 s (> u32 ns) then napi-get: 8-byte uint.
    let napis = client.napis(Some(ifindex)).await.unwrap_or_default();
    {
        if let Some(n) = napis.first() {
            let old = n.gro_flush_timeout;
            let set = Napi {
                id: n.id,
                gro_flush_timeout: Some(5_000_000_000),
                ..Napi::default()
            };
            match client.napi_set(set).await {
                Ok(()) => {
                    let ex = client
                        .netdev_exchange(&NetdevMessage::napi_get(Some(ifindex), None), true)
                        .await?;
                    write(&dir, &prefix, "netdev-napi-get-dump-gro5s", &ex)?;
                    client
                        .napi_set(Napi {
                            id: n.id,
                            gro_flush_timeout: Some(old.unwrap_or(0)),
                            ..Napi::default()
                        })
                        .await?;
                }
                Err(e) => println!("skip napi-set: {e}"),
            }
        }
    }
    Ok(())
}

async fn watch_page_pools(
    client: &netlink::Client,
    dir: &Path,
    prefix: &str,
    secs: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let fam = client.netdev_family().ok_or("no netdev family")?;
    let group = fam.group("page-pool").ok_or("no page-pool group")?;
    let mut sock = NotifySocket::open(NETLINK_GENERIC, "page-pool", &[group])?;
    println!("watching page-pool notifications for {secs} s");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(secs);
    let mut n = 0;
    while let Ok(r) = tokio::time::timeout_at(deadline, sock.recv()).await {
        if let Received::Messages(msgs) = r? {
            for m in msgs {
                n += 1;
                std::fs::write(dir.join(format!("{prefix}{n}-netdev-page-pool-ntf.bin")), m)?;
            }
        }
    }
    println!("wrote {n} notifications");
    Ok(())
}

fn set_back(changed: Option<u32>, orig: Option<u32>) -> Option<u32> {
    changed.and(orig)
}
