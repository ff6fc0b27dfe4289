/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ppsim: the device and queue state shared by ppsim_main.c (queues, traffic
 * engine, cost model, control files) and ppsim_wire.c (two devices joined
 * as a wire, see README.md "Wire mode").
 */
#ifndef PPSIM_H
#define PPSIM_H

#include <linux/debugfs.h>
#include <linux/etherdevice.h>
#include <linux/ethtool.h>
#include <linux/hrtimer.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/smp.h>
#include <linux/version.h>
#include <linux/vmalloc.h>
#include <linux/wait.h>
#include <net/netdev_queues.h>
#include <net/page_pool/helpers.h>

/* Devmem devices (queue management ops with the instance lock, header
 * split, unreadable netmem) are built against the 7.x queue API only. */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(7, 0, 0)
#define PPSIM_DEVMEM 1
#include <net/netdev_lock.h>
#include <net/netdev_rx_queue.h>
#else
#define PPSIM_DEVMEM 0
#endif

struct ppsim_personality;	/* ppsim_personality.h, ppsim_main.c only */

#define PPSIM_MAX_QUEUES	16
/* What `ethtool -i` shows as firmware-version. */
#define PPSIM_FW_VERSION	"ppsim 1"
#define PPSIM_RING_DEFAULT	256
#define PPSIM_RING_MIN		64
#define PPSIM_RING_MAX		16384
#define PPSIM_BURST_MAX		16384
/* Pages handed to the consumer and not yet returned; above this the
 * producer drops (the "socket buffer" is full). Power of two. */
#define PPSIM_HANDOFF		32768
#define PPSIM_BULK		64	/* pages per charged release bulk */
#define PPSIM_MAX_STALL_NS	(50 * NSEC_PER_MSEC)	/* longest single charge */
#define PPSIM_MAX_COST_US	50000
/* Modelled time: what one delivered page costs on the fast path (a page
 * from the pool's cache or ring, plus handing it up), see ppsim_model(). */
#define PPSIM_MODEL_PAGE_NS	1000
/* Paced delivery (pace_scale): how far a lane's wall clock may fall behind
 * its paced schedule before the lag is written off (counted in
 * pace_behind_ns), so a lane that was held up does not then run unpaced. */
#define PPSIM_PACE_SLACK_NS	(20 * NSEC_PER_MSEC)

struct ppsim_dev;

struct ppsim_entry {
	struct page *page;
	struct page_pool *pool;
};

/* Counters are written by one side (NAPI or consumer) and read anywhere;
 * 64-bit loads and stores are atomic on the architectures we build for. */
struct ppsim_lane_stats {
	u64 packets;		/* pages received and delivered */
	u64 bytes;
	u64 alloc_fail;		/* page_pool allocation failed */
	u64 drops_ring;		/* arrivals lost while the RX ring was full */
	u64 drops_backlog;	/* consumer backlog full */
	u64 returned;		/* pages returned by the consumer */
	u64 bursts;
	u64 slow_events;	/* alloc.slow increments seen by the producer */
	u64 ring_full_pages;	/* recycle.ring_full increments seen by the consumer */
	u64 release_bulks;	/* charged release bulks (ring_full pages / 64, rounded up) */
	u64 overruns;		/* wire frames lost: no free RX descriptor (also in drops_ring) */
	/* Header split: the payload buffers the wire's refills took from the
	 * memory provider (not from the pool's cache or ring), and the time
	 * those refills took, in all and the longest (ppsim_wire.c). */
	u64 mp_allocs;
	u64 mp_alloc_ns;
	u64 mp_alloc_max_ns;
};

struct ppsim_cap {
	u64 free_until;
};

struct ppsim_lane {
	struct ppsim_dev *pd;
	unsigned int idx;

	/* producer side (NAPI) */
	struct napi_struct napi;
	struct page_pool *pool;
	bool dma_mapped;	/* the pool maps its pages (ppsim_dma.c) */
	/* Header split (a devmem device's queue with a memory provider bound,
	 * ppsim_devmem.c): `pool` gives the payload buffers (net_iovs of the
	 * provider, posted in `dposted`), `hdr_pool` the host pages the
	 * headers land in (posted in `posted`). NULL otherwise. */
	struct page_pool *hdr_pool;
	netmem_ref *dposted;
	struct hrtimer timer;
	bool napi_added;
	u64 last_ns;		/* last arrival accounting */
	u64 pending;		/* arrived, not yet received (rate mode) */
	u64 frac;		/* sub-packet arrival remainder, in ns*pps */
	u64 stall_until;
	bool in_stall;
	u64 last_slow;
	int napi_cpu;
	u64 polls;

	/* The posted RX ring: buffers allocated from the pool and held by the
	 * "device" until a packet lands in them, as a NIC does. A received
	 * page is swapped for a fresh one from the pool. */
	struct page **posted;
	unsigned int nposted;
	unsigned int post_idx;

	/* Burst return is atomic with respect to the producer: the consumer
	 * raises `returning` and waits out a poll in progress (`producing`);
	 * a poll that sees `returning` backs off. Both sides then see the same
	 * sequence of allocations and returns whatever CPU each runs on. */
	int producing;
	int returning;

	/* charge-cap windows: one per side, each written by its side only */
	struct ppsim_cap cap_producer;
	struct ppsim_cap cap_consumer;

	/* single-producer single-consumer handoff ring */
	struct ppsim_entry *ho;
	unsigned long ho_head;	/* written by NAPI */
	unsigned long ho_tail;	/* written by the consumer */

	struct task_struct *consumer;
	wait_queue_head_t wq;

	struct ppsim_lane_stats st;
	atomic64_t charged_ns;	/* time charged (stalls), both sides */
	atomic64_t capped;	/* charges trimmed by the 50 % cap */
	u32 ref_acc;		/* stack_ref_pct accumulator (ppsim_put) */
	atomic64_t model_ns;	/* modelled busy time, both sides (ppsim_model) */
	/* model_ns and packets as they were at the end of the last burst
	 * return: whole receive-and-return cycles, what the modelled figure
	 * is taken from (a window cut mid-burst would count a burst's cheap
	 * first pages without its slow refills and release, or the reverse). */
	atomic64_t model_done_ns;
	atomic64_t model_done_pk;
	/* Paced delivery (pace_scale, see ppsim_pace()): wall time and
	 * model_ns when the schedule started, and the lag written off. */
	u64 pace_t0;
	u64 pace_m0;
	u64 pace_pk0;
	atomic64_t pace_behind_ns;

	/* Wire mode (ppsim_wire.c): the posted ring is the RX descriptor
	 * ring. Slot i holds posted[i]; the peer's xmit fills slot
	 * wire_prod % nposted (under wire_lock, several of its TX queues may
	 * map here), this lane's NAPI consumes from wire_cons. A slot is free
	 * while wire_prod - wire_cons < nposted. */
	spinlock_t wire_lock;
	bool wire_open;		/* xmits may fill the ring (release/acquire) */
	u32 wire_prod;
	u32 wire_cons;
	u16 *wire_len;		/* frame length per slot */
	u16 *wire_hlen;		/* header split: bytes in the header buffer per slot */
	/* this queue's transmits when wired (under the TX queue's lock) */
	u64 tx_packets;
	u64 tx_bytes;
	u64 tx_drops;
};

struct ppsim_dev {
	struct list_head list;
	struct net_device *netdev;
	unsigned int id;
	struct dentry *dir;
	char name[IFNAMSIZ];	/* at creation: the debugfs directory's name */

	/* wire mode: the device at the other end (RTNL to change, RCU to
	 * read), and whether the queues run the wire (set while down) */
	struct ppsim_dev __rcu *peer;
	bool wired;
	/* created as a devmem device (README.md "Devmem"): a DMA parent,
	 * queue management ops (so the core takes the instance lock around
	 * ndo and ethtool ops), header split, unreadable RX buffers */
	bool devmem;
	/* wire steering rule: TCP segments to port (low 16 bits) go to RX
	 * queue (high 16 bits); 0 = none, every frame by the flow hash */
	u32 steer;

	unsigned int rx_ring;
	/* the ring the next queues' pools are sized from (personality) */
	unsigned int pool_ring;
	const struct ppsim_personality *pers;
	unsigned int nq;	/* active queues (channels) */
	bool up;

	/* knobs, see README.md */
	u32 running;
	u32 rate_pps;
	u32 burst_pages;
	u32 hold_us;
	u32 slow_cost_us;
	u32 release_cost_us;
	u32 contention_pct;
	u32 stack_ref_pct;	/* returned pages the stack still references */
	u32 line_pps;		/* the device's line rate in the model, 0 = none */
	u32 pace_scale;		/* deliver at the modelled rate / this, 0 = off */
	u32 refuse_sets;	/* refuse every ring/channel set (EBUSY, extack) */
	u32 refused;		/* sets refused because of refuse_sets */
	u32 producer_cpu;
	u32 consumer_cpu;

	/* goodput window */
	u64 gp_start_ns;
	u64 gp_base_packets;
	u64 gp_base_drops;

	/* counters of queues that no longer exist (channel shrink) */
	struct ppsim_lane_stats base;
	u64 tx_packets;
	u64 tx_bytes;

	struct ppsim_lane lanes[PPSIM_MAX_QUEUES];
};

extern struct list_head ppsim_devs;

/* A control file's write as a NUL-terminated string in @buf (@size
 * bytes): EINVAL if it does not fit. */
static inline int ppsim_user_line(char *buf, size_t size, const char __user *ubuf,
				  size_t len)
{
	if (len >= size)
		return -EINVAL;
	if (copy_from_user(buf, ubuf, len))
		return -EFAULT;
	buf[len] = 0;
	return 0;
}

/* What one RX queue's buffers are: its pools and posted rings, built
 * before the queue starts and torn down after it stops, so a queue can be
 * restarted with new memory (queue management ops, a memory provider). */
struct ppsim_qmem {
	struct page_pool *pool;
	struct page_pool *hdr_pool;
	bool dma_mapped;
	struct page **posted;
	netmem_ref *dposted;
	unsigned int nposted;
	u16 *wire_len;
	u16 *wire_hlen;
};

/* ppsim_dma.c: pools map through the VM's PCI test device when it has one. */
void ppsim_dma_pool_params(struct page_pool_params *pp);
/* The PCI function pools map through, NULL without one. */
struct device *ppsim_dma_device(void);
int ppsim_dma_init(struct dentry *root);
void ppsim_dma_exit(void);
extern struct mutex ppsim_devs_lock;

#endif /* PPSIM_H */
