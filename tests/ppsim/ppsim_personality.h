/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ppsim personalities: make a ppsim device behave like a driver family in
 * the ways pptune's driver knowledge depends on (docs/drivers.md):
 *
 *   - the driver name `ethtool -i` shows (so pptune applies that row);
 *   - pool_size = f(ring, MTU): factor, cap, floor, or fixed;
 *   - how a requested RX ring is rounded or refused (EINVAL);
 *   - the ring limits `ethtool -g` shows, incl. rx-jumbo (bnxt's agg ring);
 *   - gve's stale pool: a live ring change builds the new queues with a
 *     pool sized from the *old* ring; the new size applies at the next
 *     reconfiguration (a channel change, down/up).
 *
 * Everything personality-specific lives here; ppsim_main.c calls these helpers
 * at five points (pool creation, get/set ringparam, drvinfo, debugfs).
 * Figures are from the Linux 7.3 sources cited in tests/ppsim/README.md.
 */
#ifndef PPSIM_PERSONALITY_H
#define PPSIM_PERSONALITY_H

#include <linux/log2.h>
#include <linux/minmax.h>
#include <linux/netlink.h>
#include <linux/string.h>

struct ppsim_personality {
	const char *name;	/* value of the debugfs `personality` file */
	const char *driver;	/* what ETHTOOL_GDRVINFO reports */
	u32 ring_default;
	u32 ring_min;
	u32 ring_max;
	/* Live ring change: the new pool is sized from the old ring (gve). */
	bool stale_pool;
	/* Rounds or refuses a requested ring: 0 and *ring set, or -EINVAL. */
	int (*ring)(u32 req, u32 *ring, struct netlink_ext_ack *extack);
	/* pool_size for `ring` at `mtu` (0 = the page_pool default of 1024). */
	u32 (*pool)(u32 ring, u32 mtu);
	/* rx-jumbo shown by `ethtool -g` (current and max); NULL = none. */
	void (*jumbo)(u32 ring, u32 *cur, u32 *max);
};

static int ppsim_ring_any(u32 req, u32 *ring, struct netlink_ext_ack *extack)
{
	*ring = req;
	return 0;
}

static u32 ppsim_pool_eq(u32 ring, u32 mtu)
{
	return ring;
}

/* gve: is_power_of_2() or -EINVAL, with no extack (dev_err only). */
static int ppsim_ring_pow2_or_einval(u32 req, u32 *ring, struct netlink_ext_ack *extack)
{
	if (!is_power_of_2(req))
		return -EINVAL;
	*ring = req;
	return 0;
}

/* gve DQO RDA: GVE_PAGE_POOL_SIZE_MULTIPLIER (4) x rx_desc_cnt. */
static u32 ppsim_pool_gve(u32 ring, u32 mtu)
{
	return 4 * ring;
}

/* bnxt with agg rings: agg ring = 4 x rx (TPA), capped at 8191; the pool
 * is the agg ring's fill level. */
static u32 ppsim_bnxt_agg(u32 ring)
{
	return min_t(u32, 4 * ring, 8191);
}

static u32 ppsim_pool_bnxt(u32 ring, u32 mtu)
{
	return ppsim_bnxt_agg(ring);
}

static void ppsim_jumbo_bnxt(u32 ring, u32 *cur, u32 *max)
{
	*cur = ppsim_bnxt_agg(ring);
	*max = 8191;
}

/* bnxt without agg rings: pool_size 0 -> the page_pool default (1024). */
static u32 ppsim_pool_zero(u32 ring, u32 mtu)
{
	return 0;
}

/* mlx5: order_base_2(rx_pending), min 16 with an extack. */
static int ppsim_ring_mlx5(u32 req, u32 *ring, struct netlink_ext_ack *extack)
{
	if (req < 16) {
		NL_SET_ERR_MSG_FMT(extack, "rx (%u) < min (%u)", req, 16);
		return -EINVAL;
	}
	*ring = roundup_pow_of_two(req);
	return 0;
}

/* mlx5 striding RQ: pages_per_wqe << log_rq_size = ring x stride / page,
 * stride = roundup_pow_of_two(SKB_DATA_ALIGN(MTU + 22 + 64) + 320); floor
 * 4 WQEs of 64 pages. */
static u32 ppsim_pool_mlx5_striding(u32 ring, u32 mtu)
{
	u32 stride = roundup_pow_of_two(ALIGN(mtu + 22 + 64, 64) + 320);
	u64 pool = (u64)ring * stride / 4096;

	return max_t(u64, pool, 256);
}

/* octeontx2: Q_COUNT(Q_SIZE(x, 3)) = 16 << 2 * ((ilog2(x) - 3) / 2), min 16
 * (netdev_err only, no extack). */
static int ppsim_ring_otx2(u32 req, u32 *ring, struct netlink_ext_ack *extack)
{
	if (req < 16)
		return -EINVAL;
	*ring = 16U << (2 * ((ilog2(req) - 3) / 2));
	return 0;
}

/* octeontx2: min(OTX2_PAGE_POOL_SZ (2048), rqe_cnt). */
static u32 ppsim_pool_otx2(u32 ring, u32 mtu)
{
	return min_t(u32, ring, 2048);
}

static const struct ppsim_personality ppsim_personalities[] = {
	/* The default: pool = ring, like ice without the rounding. */
	{ "ppsim", "ppsim", 256, 64, 16384, false,
	  ppsim_ring_any, ppsim_pool_eq, NULL },
	{ "gve", "gve", 1024, 512, 4096, true,
	  ppsim_ring_pow2_or_einval, ppsim_pool_gve, NULL },
	{ "bnxt", "bnxt_en", 511, 1, 2047, false,
	  ppsim_ring_any, ppsim_pool_bnxt, ppsim_jumbo_bnxt },
	{ "bnxt-noagg", "bnxt_en", 511, 1, 8191, false,
	  ppsim_ring_any, ppsim_pool_zero, NULL },
	{ "mlx5-striding", "mlx5_core", 1024, 16, 8192, false,
	  ppsim_ring_mlx5, ppsim_pool_mlx5_striding, NULL },
	{ "octeontx2", "rvu_nicpf", 1024, 16, 1048576, false,
	  ppsim_ring_otx2, ppsim_pool_otx2, NULL },
	/* A driver pptune has no row for that refuses, without an extack,
	 * a ring that is not a power of two (as gve, ionic and eea do): what
	 * pptune must learn from the refusal. */
	{ "pow2", "ppsim-pow2", 256, 64, 16384, false,
	  ppsim_ring_pow2_or_einval, ppsim_pool_eq, NULL },
};

static const struct ppsim_personality *ppsim_personality_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(ppsim_personalities); i++)
		if (sysfs_streq(name, ppsim_personalities[i].name))
			return &ppsim_personalities[i];
	return NULL;
}

/* The ring the pool of a queue rebuilt now is sized from: the old ring on
 * a live ring change of a stale-pool personality, else the current one. */
static u32 ppsim_personality_pool_ring(const struct ppsim_personality *p, bool live,
				       u32 old_ring, u32 new_ring)
{
	return (p->stale_pool && live) ? old_ring : new_ring;
}

#endif /* PPSIM_PERSONALITY_H */
