//! What the kernel can and cannot show, in words: `status` prints these
//! and the loop logs them, so both say it the same way.

use policy::snapshot::{Capabilities, Device};

/// Drivers known to create page pools without a netdev (invisible to
/// netlink); the list and how it was found are in docs/drivers.md.
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
    let driver = d.driver.as_deref().unwrap_or("(unknown)");
    Some(match no_pools_why(d, c)? {
        Unjudged::NoPoolIntrospection => "no page pools: this kernel cannot list them".to_owned(),
        Unjudged::DeviceDown => {
            "no page pools: the device is down (drivers create pools when it is brought up)"
                .to_owned()
        }
        Unjudged::DriverHidesPools => format!(
            "no page pools visible: driver {driver} creates its pools without a netdev, so netlink cannot list them"
        ),
        _ => format!(
            "no page pools reported: driver {driver} may not use page_pool, or creates its pools without a netdev"
        ),
    })
}

/// Why pptune can judge nothing on a device (or a host): the `reason` of
/// `pptune_device_unjudged` and `pptune_judging_nothing`. In precedence
/// order: a host where no device can be judged gives the first of its
/// devices' reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unjudged {
    /// The kernel cannot list page pools (before Linux 6.8, or no
    /// `CONFIG_PAGE_POOL`).
    NoPoolIntrospection,
    /// The kernel lists pools but has no `CONFIG_PAGE_POOL_STATS`.
    NoPoolStats,
    /// The driver creates its pools without a netdev: netlink cannot list
    /// them.
    DriverHidesPools,
    /// The device shows no pools (its driver may not use page_pool).
    NoPools,
    /// The device is down: drivers create pools when it comes up.
    DeviceDown,
    /// The driver reports no ring sizes.
    RingsUnavailable,
    /// The policy manages no knob the device has.
    NotManaged,
    /// No selector of the policy takes the device.
    NotSelected,
    /// No network device but loopback (host only).
    NoDevices,
}

impl Unjudged {
    /// Every reason, in precedence order.
    pub const ALL: [Self; 9] = [
        Self::NoPoolIntrospection,
        Self::NoPoolStats,
        Self::DriverHidesPools,
        Self::NoPools,
        Self::DeviceDown,
        Self::RingsUnavailable,
        Self::NotManaged,
        Self::NotSelected,
        Self::NoDevices,
    ];

    /// The label value.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoPoolIntrospection => "no_pool_introspection",
            Self::NoPoolStats => "no_pool_stats",
            Self::DriverHidesPools => "driver_hides_pools",
            Self::NoPools => "no_pools",
            Self::DeviceDown => "device_down",
            Self::RingsUnavailable => "rings_unavailable",
            Self::NotManaged => "not_managed",
            Self::NotSelected => "not_selected",
            Self::NoDevices => "no_devices",
        }
    }

    /// Why `d` cannot be judged, from the policy's selection and the
    /// pass's decision for it; `None` when it can be (or is not decided
    /// yet). "Cannot" is [`policy::plan::ReasonCode::cannot_judge`]'s.
    #[must_use]
    pub fn of(
        d: &Device,
        c: &Capabilities,
        policy: &policy::Policy,
        decision: Option<&policy::plan::Decision>,
    ) -> Option<Self> {
        use policy::plan::ReasonCode;
        use policy::select::Unselected;
        let pools = || no_pools_why(d, c).unwrap_or(Self::NoPools);
        match (policy.unselected_because(d), decision) {
            (Some(Unselected::NoPools), _) => Some(pools()),
            (Some(_), _) => Some(Self::NotSelected),
            (None, Some(dec)) if dec.reason.cannot_judge() => Some(match dec.reason {
                ReasonCode::NoPools => pools(),
                ReasonCode::NoStats => Self::NoPoolStats,
                ReasonCode::RingsUnavailable => Self::RingsUnavailable,
                _ => Self::NotManaged,
            }),
            (None, _) => None,
        }
    }
}

/// Why `d` shows no page pools, or `None` when it shows some.
fn no_pools_why(d: &Device, c: &Capabilities) -> Option<Unjudged> {
    if d.pools().next().is_some() {
        return None;
    }
    let driver = d.driver.as_deref().unwrap_or("(unknown)");
    Some(if !c.page_pool_get {
        Unjudged::NoPoolIntrospection
    } else if !d.admin_up {
        Unjudged::DeviceDown
    } else if INVISIBLE_POOL_DRIVERS.contains(&driver) {
        Unjudged::DriverHidesPools
    } else {
        Unjudged::NoPools
    })
}
