//! What the kernel can and cannot show, in words: `status` prints these
//! and the loop logs them, so both say it the same way.

use policy::snapshot::{Capabilities, Device};

/// Drivers known to create page pools without a netdev (invisible to
/// netlink); from `docs/kernel-interfaces.md` §4.
const INVISIBLE_POOL_DRIVERS: &[&str] = &[
    "veth",
    "stmmac",
    "mvneta",
    "mvpp2",
    "airoha",
    "bcmgenet",
    "hibmcge",
    "mtk_soc_eth",
    "mlxsw_spectrum",
    "lan966x-switch",
    "rtase",
    "ravb",
    "am65-cpsw-nuss",
    "cpsw",
    "icssg-prueth",
];

/// The capability line, in words.
#[must_use]
pub fn capability_words(c: &Capabilities) -> Vec<String> {
    let yes_no = |b| if b { "available" } else { "unavailable" };
    let mut v = Vec::new();
    v.push(if !c.netdev_family {
        "page-pool introspection: unavailable — kernel has no netdev netlink family (needs Linux 6.8+)".to_owned()
    } else if !c.page_pool_get {
        "page-pool introspection: unavailable — kernel lacks page-pool-get (needs Linux 6.8+ with CONFIG_PAGE_POOL)".to_owned()
    } else {
        "page-pool introspection: available".to_owned()
    });
    v.push(if c.page_pool_stats {
        "page-pool stats: available".to_owned()
    } else if c.page_pool_get {
        "page-pool stats: unavailable — kernel built without CONFIG_PAGE_POOL_STATS".to_owned()
    } else {
        "page-pool stats: unavailable".to_owned()
    });
    v.push(format!(
        "queues/NAPI: {}",
        yes_no(c.queue_get && c.napi_get)
    ));
    v.push(if c.qstats_get {
        "qstats: available (where the driver reports them)".to_owned()
    } else {
        "qstats: unavailable — kernel lacks qstats-get (needs Linux 6.9+)".to_owned()
    });
    v.push(if c.ethtool_family {
        "ethtool netlink: available".to_owned()
    } else {
        "ethtool netlink: unavailable — rings and channels cannot be read".to_owned()
    });
    v.push(if c.cap_net_admin {
        "changing rings/channels: allowed (CAP_NET_ADMIN)".to_owned()
    } else {
        "changing rings/channels: not allowed (no CAP_NET_ADMIN; reading works)".to_owned()
    });
    v
}

/// Why `d` shows no page pools, or `None` when it shows some: the one
/// explanation `status` prints and the daemon logs when it selects nothing.
pub fn no_pools_note(d: &Device, c: &Capabilities) -> Option<String> {
    if d.pools().next().is_some() {
        return None;
    }
    let driver = d.driver.as_deref().unwrap_or("(unknown)");
    Some(if !c.page_pool_get {
        "no page pools: this kernel cannot list them".to_owned()
    } else if !d.admin_up {
        "no page pools: the device is down (drivers create pools when it is brought up)".to_owned()
    } else if INVISIBLE_POOL_DRIVERS.contains(&driver) {
        format!(
            "no page pools visible: driver {driver} creates its pools without a netdev, so netlink cannot list them"
        )
    } else {
        format!(
            "no page pools reported: driver {driver} may not use page_pool, or creates its pools without a netdev"
        )
    })
}
