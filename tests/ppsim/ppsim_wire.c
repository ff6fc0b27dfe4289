// SPDX-License-Identifier: GPL-2.0
/*
 * ppsim wire mode: two ppsim devices joined like two NICs on one cable.
 *
 * A frame A transmits is copied (the "DMA") into the oldest free posted
 * page_pool buffer of one of B's RX queues, chosen by a symmetric flow
 * hash (RSS). B's NAPI, scheduled with napi_schedule and never run inline
 * from A's xmit, refills the descriptor from its pool first, then builds
 * an skb around the filled page (napi_build_skb), marks it for page_pool
 * recycling and hands it to GRO: real frames through the real stack, with
 * every page's return decided by the stack and the sockets. When B's ring
 * has no free descriptor the frame is lost at B (hw_drop_overruns), as on
 * Ethernet without flow control. Nothing on this path is modelled or
 * charged: the cost model and pacing of ppsim_main.c are not used (a
 * wired device refuses `running`). MTU 1500: one frame per page.
 */
#include <linux/dma-direct.h>
#include <linux/highmem.h>
#include <linux/iommu.h>
#include <net/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include "ppsim_wire.h"

#define PPSIM_WIRE_HEADROOM	(NET_SKB_PAD + NET_IP_ALIGN)
#define PPSIM_WIRE_MAX_FRAME	(PAGE_SIZE - PPSIM_WIRE_HEADROOM - \
				 SKB_DATA_ALIGN(sizeof(struct skb_shared_info)))
#define PPSIM_WIRE_FEATURES	(NETIF_F_SG | NETIF_F_HW_CSUM | NETIF_F_RXCSUM | \
				 NETIF_F_HIGHDMA)

/* Header split: how many leading bytes of a frame are its headers. */
#define PPSIM_SPLIT_PEEK	256

/* ---- receive: B's NAPI ------------------------------------------------- */

/* Hand the frame in @slot up the stack. Refill first: without a fresh
 * buffer the frame is dropped and its buffer stays posted.
 *
 * A header-split slot (a devmem device's queue with a provider bound):
 * the headers are in a host page of the header pool, the payload, if
 * any, in the posted net_iov, and both are refilled. The net_iov becomes
 * an unreadable frag of the skb (skb_add_rx_frag_netmem marks it so):
 * the stack hands it to a devmem socket as a token, never reads it. */
static void ppsim_wire_rx_one(struct ppsim_lane *lane, u32 slot)
{
	unsigned int len = lane->wire_len[slot], hlen = len, plen;
	struct page_pool *hpool = lane->hdr_pool ?: lane->pool;
	struct page *page, *fresh;
	struct sk_buff *skb;
#if PPSIM_DEVMEM
	netmem_ref fresh_d = 0, data;

	if (lane->dposted)
		hlen = lane->wire_hlen[slot];
#endif
	plen = len - hlen;
	fresh = page_pool_dev_alloc_pages(hpool);
	if (!fresh) {
		WRITE_ONCE(lane->st.alloc_fail, lane->st.alloc_fail + 1);
		return;
	}
#if PPSIM_DEVMEM
	if (plen) {
		/* A refill the pool's cache and ring cannot serve goes to the
		 * provider (its alloc_netmems counts a held page): timed. */
		u32 held = READ_ONCE(lane->pool->pages_state_hold_cnt);
		u64 t0 = ktime_get_ns(), ns;

		fresh_d = page_pool_dev_alloc_netmems(lane->pool);
		if (READ_ONCE(lane->pool->pages_state_hold_cnt) != held) {
			ns = ktime_get_ns() - t0;
			WRITE_ONCE(lane->st.mp_allocs, lane->st.mp_allocs + 1);
			WRITE_ONCE(lane->st.mp_alloc_ns, lane->st.mp_alloc_ns + ns);
			if (ns > lane->st.mp_alloc_max_ns)
				WRITE_ONCE(lane->st.mp_alloc_max_ns, ns);
		}
		if (!fresh_d) {
			page_pool_recycle_direct(hpool, fresh);
			WRITE_ONCE(lane->st.alloc_fail, lane->st.alloc_fail + 1);
			return;
		}
	}
#endif
	page = lane->posted[slot];
	lane->posted[slot] = fresh;
	/* What the "device" wrote becomes the CPU's, as in a NIC driver. */
	if (lane->dma_mapped)
		page_pool_dma_sync_for_cpu(hpool, page, PPSIM_WIRE_HEADROOM, hlen);
	skb = napi_build_skb(page_address(page), PAGE_SIZE);
	if (!skb) {
		page_pool_recycle_direct(hpool, page);
#if PPSIM_DEVMEM
		if (plen)
			page_pool_recycle_direct_netmem(lane->pool, fresh_d);
#endif
		WRITE_ONCE(lane->st.alloc_fail, lane->st.alloc_fail + 1);
		return;
	}
	skb_reserve(skb, PPSIM_WIRE_HEADROOM);
	__skb_put(skb, hlen);
	skb_mark_for_recycle(skb);
#if PPSIM_DEVMEM
	if (plen) {
		data = lane->dposted[slot];
		lane->dposted[slot] = fresh_d;
		skb_add_rx_frag_netmem(skb, 0, data, 0, plen, PAGE_SIZE);
	}
#endif
	skb->protocol = eth_type_trans(skb, lane->pd->netdev);
	/* The sender leaves checksums to the "hardware" (HW_CSUM); a NIC
	 * that verified them reports this. */
	skb->ip_summed = CHECKSUM_UNNECESSARY;
	skb_record_rx_queue(skb, lane->idx);
	WRITE_ONCE(lane->st.packets, lane->st.packets + 1);
	WRITE_ONCE(lane->st.bytes, lane->st.bytes + len);
	napi_gro_receive(&lane->napi, skb);
}

int ppsim_wire_poll(struct napi_struct *napi, int budget)
{
	struct ppsim_lane *lane = container_of(napi, struct ppsim_lane, napi);
	u32 prod = smp_load_acquire(&lane->wire_prod), cons = lane->wire_cons;
	int done = 0;

	lane->napi_cpu = smp_processor_id();
	lane->polls++;
	while (done < budget && cons != prod) {
		ppsim_wire_rx_one(lane, cons % lane->nposted);
		/* The descriptor is free again for the sender. */
		smp_store_release(&lane->wire_cons, ++cons);
		done++;
	}
	/* A frame that lands after this finds NAPI scheduled (MISSED) and
	 * napi_complete_done reschedules it. */
	if (done < budget)
		napi_complete_done(napi, done);
	return done;
}

/* ---- transmit: A's xmit ------------------------------------------------ */

enum ppsim_wire_fate { PPSIM_WIRE_LOST_AT_A, PPSIM_WIRE_SENT };

/* Where a TCP segment's TCP header starts in the first @n bytes of a
 * frame (Ethernet, then IPv4 or IPv6 without extension headers), or 0 when
 * the frame is not such a segment or its header is not all in @n. */
static unsigned int ppsim_tcp_off(const u8 *p, unsigned int n)
{
	const struct ethhdr *eth = (const void *)p;
	unsigned int off = ETH_HLEN;
	u8 proto;

	if (n < ETH_HLEN)
		return 0;
	if (eth->h_proto == htons(ETH_P_IP)) {
		const struct iphdr *ip = (const void *)(p + off);

		if (n < off + sizeof(*ip) || ip->version != 4 || ip->ihl < 5 ||
		    (ip->frag_off & htons(IP_MF | IP_OFFSET)))
			return 0;
		proto = ip->protocol;
		off += ip->ihl * 4;
	} else if (eth->h_proto == htons(ETH_P_IPV6)) {
		const struct ipv6hdr *ip6 = (const void *)(p + off);

		if (n < off + sizeof(*ip6))
			return 0;
		proto = ip6->nexthdr;
		off += sizeof(*ip6);
	} else {
		return 0;
	}
	if (proto != IPPROTO_TCP || n < off + sizeof(struct tcphdr))
		return 0;
	return off;
}

#if PPSIM_DEVMEM
/* The length of a TCP segment's headers (TCP options included), or 0:
 * what a NIC's header split recognises; anything else lands whole in the
 * header buffer. */
static unsigned int ppsim_split_len(const u8 *p, unsigned int n)
{
	unsigned int off = ppsim_tcp_off(p, n), end;
	const struct tcphdr *th = (const void *)(p + off);

	if (!off || th->doff < 5)
		return 0;
	end = off + th->doff * 4;
	return end <= n ? end : 0;
}
#endif

/* The RX queue a frame goes to at @peer: the steering rule's queue for a
 * TCP segment to its port (an ntuple rule, `steer`), else the symmetric
 * flow hash (RSS). */
static u32 ppsim_wire_rx_queue(struct ppsim_dev *peer, struct sk_buff *skb)
{
	u32 rule = READ_ONCE(peer->steer), nq = READ_ONCE(peer->nq);
	u8 buf[128];
	unsigned int n = min_t(unsigned int, skb->len, sizeof(buf)), off;
	const u8 *p;

	if (rule) {
		p = skb_header_pointer(skb, 0, n, buf);
		off = p ? ppsim_tcp_off(p, n) : 0;
		if (off && ntohs(((const struct tcphdr *)(p + off))->dest) == (rule & 0xffff) &&
		    (rule >> 16) < nq)
			return rule >> 16;
	}
	return reciprocal_scale(__skb_get_hash_symmetric(skb), nq);
}

#if PPSIM_DEVMEM
/* A CPU address of a posted net_iov's memory, where the device's DMA
 * would write: its DMA address back through the IOMMU when the pool's
 * device has a translating one, else the direct mapping; then the page
 * of the dma-buf (a udmabuf's memfd page) in the kernel's map. Unmap with
 * kunmap_local. */
static void *ppsim_netmem_map(struct ppsim_lane *lane, netmem_ref nm)
{
	struct device *dev = lane->pool->p.dev;
	dma_addr_t dma = page_pool_get_dma_addr_netmem(nm);
	struct iommu_domain *dom = iommu_get_domain_for_dev(dev);
	phys_addr_t phys = dom ? iommu_iova_to_phys(dom, dma) : dma_to_phys(dev, dma);

	if (!phys || !pfn_valid(PHYS_PFN(phys)))
		return NULL;
	return kmap_local_page(pfn_to_page(PHYS_PFN(phys))) + offset_in_page(phys);
}

/* Header split into @slot: headers into the header page, a TCP payload
 * into the net_iov's memory (the "DMA"). */
static int ppsim_wire_copy_split(struct ppsim_lane *lane, u32 slot, struct sk_buff *skb)
{
	u8 *hdr = page_address(lane->posted[slot]) + PPSIM_WIRE_HEADROOM;
	unsigned int len = skb->len, peek = min(len, PPSIM_SPLIT_PEEK), hlen;
	void *dst;
	int err;

	err = skb_copy_bits(skb, 0, hdr, peek);
	if (err)
		return err;
	hlen = ppsim_split_len(hdr, peek);
	if (!hlen || hlen >= len) {
		hlen = len;
		err = skb_copy_bits(skb, peek, hdr + peek, len - peek);
	} else {
		dst = ppsim_netmem_map(lane, lane->dposted[slot]);
		if (!dst)
			return -EFAULT;
		err = skb_copy_bits(skb, hlen, dst, len - hlen);
		kunmap_local(dst);
	}
	lane->wire_hlen[slot] = hlen;
	return err;
}
#endif

/* Copy @skb into a free descriptor of @lane; an overrun (no free
 * descriptor) is B's drop, the frame still left A. */
static enum ppsim_wire_fate ppsim_wire_put(struct ppsim_lane *lane, struct sk_buff *skb)
{
	u32 prod, slot;
	int err;

	spin_lock(&lane->wire_lock);
	prod = lane->wire_prod;
	if (prod - smp_load_acquire(&lane->wire_cons) >= lane->nposted) {
		WRITE_ONCE(lane->st.overruns, lane->st.overruns + 1);
		WRITE_ONCE(lane->st.drops_ring, lane->st.drops_ring + 1);
		spin_unlock(&lane->wire_lock);
		return PPSIM_WIRE_SENT;
	}
	slot = prod % lane->nposted;
#if PPSIM_DEVMEM
	if (lane->dposted)
		err = ppsim_wire_copy_split(lane, slot, skb);
	else
#endif
		err = skb_copy_bits(skb, 0, page_address(lane->posted[slot]) + PPSIM_WIRE_HEADROOM,
				    skb->len);
	if (!err) {
		lane->wire_len[slot] = skb->len;
		smp_store_release(&lane->wire_prod, prod + 1);
	}
	spin_unlock(&lane->wire_lock);
	if (err)
		return PPSIM_WIRE_LOST_AT_A;
	napi_schedule(&lane->napi);
	return PPSIM_WIRE_SENT;
}

netdev_tx_t ppsim_wire_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct ppsim_dev *pd = netdev_priv(dev), *peer;
	struct ppsim_lane *txl = &pd->lanes[skb_get_queue_mapping(skb)], *lane;
	enum ppsim_wire_fate fate = PPSIM_WIRE_LOST_AT_A;
	unsigned int len = skb->len;

	rcu_read_lock();
	peer = rcu_dereference(pd->peer);
	if (peer && len >= ETH_HLEN && len <= PPSIM_WIRE_MAX_FRAME) {
		u32 q = ppsim_wire_rx_queue(peer, skb);

		lane = &peer->lanes[q];
		/* Pairs with ppsim_wire_lane_start/ppsim_wire_quiesce. */
		if (smp_load_acquire(&lane->wire_open))
			fate = ppsim_wire_put(lane, skb);
	}
	rcu_read_unlock();
	if (fate == PPSIM_WIRE_SENT) {
		WRITE_ONCE(txl->tx_packets, txl->tx_packets + 1);
		WRITE_ONCE(txl->tx_bytes, txl->tx_bytes + len);
		skb_tx_timestamp(skb);
		dev_consume_skb_any(skb);
	} else {
		WRITE_ONCE(txl->tx_drops, txl->tx_drops + 1);
		dev_kfree_skb_any(skb);
	}
	return NETDEV_TX_OK;
}

int ppsim_wire_get_iflink(const struct net_device *dev)
{
	struct ppsim_dev *pd = netdev_priv(dev), *peer;
	int iflink;

	rcu_read_lock();
	peer = rcu_dereference(pd->peer);
	iflink = peer ? READ_ONCE(peer->netdev->ifindex) : READ_ONCE(dev->ifindex);
	rcu_read_unlock();
	return iflink;
}

/* ---- queue lifetime ---------------------------------------------------- */

void ppsim_wire_lane_start(struct ppsim_lane *lane)
{
	smp_store_release(&lane->wire_open, true);
}

void ppsim_wire_lane_quiesce(struct ppsim_lane *lane)
{
	WRITE_ONCE(lane->wire_open, false);
	synchronize_net();
}

void ppsim_wire_quiesce(struct ppsim_dev *pd)
{
	unsigned int i;

	for (i = 0; i < PPSIM_MAX_QUEUES; i++)
		WRITE_ONCE(pd->lanes[i].wire_open, false);
	/* xmits run under rcu_read_lock: after this none writes a ring or
	 * schedules a NAPI of ours; frames in the ring are lost (unposted). */
	synchronize_net();
}

void ppsim_wire_carrier(struct ppsim_dev *pd, bool up)
{
	struct ppsim_dev *peer = rtnl_dereference(pd->peer);

	if (!peer)
		return;
	if (up && peer->up) {
		netif_carrier_on(pd->netdev);
		netif_carrier_on(peer->netdev);
	} else if (!up) {
		netif_carrier_off(peer->netdev);
	}
}

void ppsim_wire_cut(struct ppsim_dev *pd)
{
	struct ppsim_dev *peer;

	rtnl_lock();
	peer = rtnl_dereference(pd->peer);
	if (peer) {
		RCU_INIT_POINTER(peer->peer, NULL);
		RCU_INIT_POINTER(pd->peer, NULL);
		netif_carrier_off(peer->netdev);
	}
	rtnl_unlock();
	synchronize_net();
}

/* ---- link_wire / unlink_wire ------------------------------------------- */

/* Caller holds ppsim_devs_lock. */
static struct ppsim_dev *ppsim_wire_find(const char *name)
{
	struct ppsim_dev *pd;

	list_for_each_entry(pd, &ppsim_devs, list)
		if (!strcmp(pd->name, name))
			return pd;
	return NULL;
}

static void ppsim_wire_features(struct net_device *dev)
{
	dev->hw_features |= PPSIM_WIRE_FEATURES;
	dev->wanted_features |= PPSIM_WIRE_FEATURES;
	netdev_update_features(dev);
}

/* Both down, neither running the traffic engine; under RTNL. */
static int ppsim_wire_busy(struct ppsim_dev *pd)
{
	return pd->up || netif_running(pd->netdev) || READ_ONCE(pd->running) ? -EBUSY : 0;
}

static int ppsim_wire_link(struct ppsim_dev *a, struct ppsim_dev *b)
{
	int err;

	if (a == b)
		return -EINVAL;
	if (rtnl_dereference(a->peer) || rtnl_dereference(b->peer))
		return -EEXIST;
	err = ppsim_wire_busy(a) ?: ppsim_wire_busy(b);
	if (err)
		return err;
	a->wired = true;
	b->wired = true;
	rcu_assign_pointer(a->peer, b);
	rcu_assign_pointer(b->peer, a);
	ppsim_wire_features(a->netdev);
	ppsim_wire_features(b->netdev);
	return 0;
}

static int ppsim_wire_unlink(struct ppsim_dev *a)
{
	struct ppsim_dev *b = rtnl_dereference(a->peer);
	int err;

	if (!b)
		return -ENOENT;
	err = ppsim_wire_busy(a) ?: ppsim_wire_busy(b);
	if (err)
		return err;
	RCU_INIT_POINTER(a->peer, NULL);
	RCU_INIT_POINTER(b->peer, NULL);
	a->wired = false;
	b->wired = false;
	return 0;
}

/* "ppsimA ppsimB" (link) or "ppsimA" (unlink): debugfs names, which
 * survive renames and netns moves. */
static ssize_t ppsim_wire_write(struct file *f, const char __user *ubuf, size_t len,
				loff_t *ppos, bool link)
{
	char buf[2 * IFNAMSIZ + 4], a[IFNAMSIZ], b[IFNAMSIZ];
	struct ppsim_dev *pa, *pb = NULL;
	int n, err;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	n = sscanf(buf, "%15s %15s", a, b);
	if (n != (link ? 2 : 1))
		return -EINVAL;
	mutex_lock(&ppsim_devs_lock);
	rtnl_lock();
	pa = ppsim_wire_find(a);
	if (link)
		pb = ppsim_wire_find(b);
	if (!pa || (link && !pb))
		err = -ENODEV;
	else
		err = link ? ppsim_wire_link(pa, pb) : ppsim_wire_unlink(pa);
	rtnl_unlock();
	if (!err && !link)
		synchronize_net();
	mutex_unlock(&ppsim_devs_lock);
	return err ? err : len;
}

static ssize_t ppsim_link_write(struct file *f, const char __user *ubuf, size_t len,
				loff_t *ppos)
{
	return ppsim_wire_write(f, ubuf, len, ppos, true);
}

static ssize_t ppsim_unlink_write(struct file *f, const char __user *ubuf, size_t len,
				  loff_t *ppos)
{
	return ppsim_wire_write(f, ubuf, len, ppos, false);
}

static const struct file_operations ppsim_link_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ppsim_link_write,
	.llseek = default_llseek,
};

static const struct file_operations ppsim_unlink_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ppsim_unlink_write,
	.llseek = default_llseek,
};

void ppsim_wire_debugfs_init(struct dentry *root)
{
	debugfs_create_file("link_wire", 0200, root, NULL, &ppsim_link_fops);
	debugfs_create_file("unlink_wire", 0200, root, NULL, &ppsim_unlink_fops);
}
