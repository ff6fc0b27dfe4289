// SPDX-License-Identifier: GPL-2.0
/*
 * ppsim: a simulated NIC whose RX queues behave like a page_pool driver's,
 * for testing pptune against a real kernel (see README.md in this folder).
 *
 * Each RX queue ("lane") has a NAPI instance and a page_pool registered with
 * the netdev and the NAPI, pool_size equal to the RX ring size. A traffic
 * engine "receives" by allocating pages from the pool in NAPI context and
 * hands them to a consumer kthread on another CPU, which holds them and
 * returns them in bursts, the pattern that overflows small pool rings.
 *
 * The VM the tests run in makes the page allocator nearly free, so the
 * module can charge a configurable cost for each slow-path refill and each
 * bulk of pages freed past a full recycle ring. The cost is charged as time
 * (the NAPI or the consumer sleeps on an hrtimer; no CPU is burned), passes
 * through a simulated allocator lock shared by all queues, optionally grows
 * with the number of queues charged at the same moment, and is capped at
 * half of each 100 ms window per queue so the VM stays responsive.
 */
#include "ppsim.h"
#include "ppsim_personality.h"
#include "ppsim_wire.h"

#ifndef CONFIG_PAGE_POOL_STATS
#error "ppsim needs CONFIG_PAGE_POOL_STATS (it reads the pool's own counters to charge costs)"
#endif

LIST_HEAD(ppsim_devs);
DEFINE_MUTEX(ppsim_devs_lock);
static unsigned int ppsim_next_id;
static struct dentry *ppsim_root;

/* The simulated page-allocator lock all queues' slow paths go through. */
static DEFINE_SPINLOCK(ppsim_alloc_lock);
static u64 ppsim_alloc_busy_until;
static atomic_t ppsim_charged_now = ATOMIC_INIT(0);

static u64 lane_total(const struct ppsim_lane_stats *s)
{
	return s->drops_ring + s->drops_backlog + s->alloc_fail;
}

/* ---- cost model -------------------------------------------------------- */

/*
 * Charge @base_ns for one slow-path event on @lane at @now. Returns the time
 * the charged side must wait until. The caller must call ppsim_uncharge()
 * once that time has passed.
 */
static u64 ppsim_charge(struct ppsim_lane *lane, struct ppsim_cap *cap, u64 base_ns,
			u64 now)
{
	struct ppsim_dev *pd = lane->pd;
	u64 cost, start, wait;
	int others;

	others = atomic_inc_return(&ppsim_charged_now) - 1;
	/* At most half the time: a side that was just charged w runs free
	 * for w before it can be charged again; charges that come earlier
	 * are dropped (counted in capped). */
	if (now < cap->free_until) {
		atomic64_inc(&lane->capped);
		return now;
	}
	cost = base_ns;
	if (others > 0 && READ_ONCE(pd->contention_pct))
		cost += div_u64(base_ns * READ_ONCE(pd->contention_pct) * others, 100);

	spin_lock_bh(&ppsim_alloc_lock);
	start = max(now, ppsim_alloc_busy_until);
	/* never let the simulated lock's backlog run more than one stall ahead */
	ppsim_alloc_busy_until = min(start + cost, now + PPSIM_MAX_STALL_NS);
	spin_unlock_bh(&ppsim_alloc_lock);
	wait = start - now + cost;
	if (wait > PPSIM_MAX_STALL_NS) {
		wait = PPSIM_MAX_STALL_NS;
		atomic64_inc(&lane->capped);
	}
	cap->free_until = now + 2 * wait;
	atomic64_add(wait, &lane->charged_ns);
	return now + wait;
}

static void ppsim_uncharge(void)
{
	atomic_dec(&ppsim_charged_now);
}

/*
 * Modelled time, the figure the outcome benchmark decides on: a pure
 * function of the lane's event counts, so it does not move with the host's
 * load or the guest's scheduling. Each delivered page costs
 * PPSIM_MODEL_PAGE_NS; each slow-path refill slow_cost_us and each release
 * bulk past a full ring release_cost_us, both scaled by contention (the
 * refills are counted as the pool needs them, see ppsim_release()):
 * (1 + contention_pct/100 x (queues - 1))^2, the cost of a lock every
 * queue's slow path takes (more waiters, each waiting longer on a bouncing
 * cache line). No cap applies (unlike the charged stalls).
 */
static u64 ppsim_model_ns(struct ppsim_dev *pd, u64 pages, u64 events, u32 cost_us)
{
	u64 c = pages * PPSIM_MODEL_PAGE_NS;

	if (events && cost_us) {
		u64 f = 100 + (u64)min_t(u32, READ_ONCE(pd->contention_pct), 1000) *
			(READ_ONCE(pd->nq) - 1);
		u64 e = events * min_t(u32, cost_us, PPSIM_MAX_COST_US) * NSEC_PER_USEC;

		c += div_u64(div_u64(e * f, 100) * f, 100);
	}
	return c;
}

static void ppsim_model(struct ppsim_lane *lane, u64 pages, u64 events, u32 cost_us)
{
	u64 c = ppsim_model_ns(lane->pd, pages, events, cost_us);

	if (c)
		atomic64_add(c, &lane->model_ns);
}

/*
 * Paced delivery: with pace_scale = S > 0 a lane delivers no faster than
 * its modelled time, stretched S times, allows: the wall time since the
 * schedule started is at least S x the modelled time the lane has gone
 * through since then (and S x its pages at its share of line_pps). The
 * kernel-visible rx-packets rate then follows the model (the modelled
 * rate / S) as long as the emulated CPU keeps up; the lag it cannot make up
 * is written off past PPSIM_PACE_SLACK_NS and counted in pace_behind_ns, so
 * a test can check that it stayed small. The charged stalls are off while
 * pacing: the model is the cost.
 */
static void ppsim_pace_start(struct ppsim_lane *lane, u64 now)
{
	struct ppsim_dev *pd = lane->pd;
	u32 scale = READ_ONCE(pd->pace_scale);
	u64 burst = clamp_t(u32, READ_ONCE(pd->burst_pages), 1, PPSIM_BURST_MAX);
	u64 lost = DIV_ROUND_UP(burst * min_t(u32, READ_ONCE(pd->stack_ref_pct), 100), 100);
	/* The queues start staggered over one paced burst cycle (as a NIC's
	 * queues are not in lockstep), so the device's count over a window
	 * does not jump by a burst per queue with the window's phase. The
	 * cycle is estimated from the pages the stack holds back; a wrong
	 * estimate only spreads the phases less evenly. */
	u64 cycle = ppsim_model_ns(pd, burst, DIV_ROUND_UP(lost, PPSIM_BULK),
				   READ_ONCE(pd->slow_cost_us));

	lane->pace_t0 = now + div_u64(cycle * scale * lane->idx, max_t(u32, READ_ONCE(pd->nq), 1));
	lane->pace_m0 = atomic64_read(&lane->model_ns);
	lane->pace_pk0 = READ_ONCE(lane->st.packets);
}

/* The ns @lane must wait before its next delivery, 0 = go. */
static u64 ppsim_pace(struct ppsim_lane *lane, u64 now, u32 scale)
{
	struct ppsim_dev *pd = lane->pd;
	u64 model = atomic64_read(&lane->model_ns) - lane->pace_m0, due;
	u32 line = READ_ONCE(pd->line_pps);

	if (line) {
		/* the lane's share of the line rate, as the modelled figure caps */
		u64 pk = READ_ONCE(lane->st.packets) - lane->pace_pk0;
		u64 floor = div_u64(pk * READ_ONCE(pd->nq) * NSEC_PER_SEC, line);

		model = max(model, floor);
	}
	due = lane->pace_t0 + model * scale;
	if (now < due)
		return due - now;
	if (now - due > PPSIM_PACE_SLACK_NS) {
		u64 lag = now - due - PPSIM_PACE_SLACK_NS;

		lane->pace_t0 += lag;
		atomic64_add(lag, &lane->pace_behind_ns);
	}
	return 0;
}

/* ---- producer: NAPI ---------------------------------------------------- */

static enum hrtimer_restart ppsim_timer_fn(struct hrtimer *t)
{
	struct ppsim_lane *lane = container_of(t, struct ppsim_lane, timer);

	napi_schedule(&lane->napi);
	return HRTIMER_NORESTART;
}

static void ppsim_arm(struct ppsim_lane *lane, u64 delay_ns)
{
	hrtimer_start(&lane->timer, ns_to_ktime(delay_ns), HRTIMER_MODE_REL_PINNED);
}

static unsigned long ho_count(struct ppsim_lane *lane)
{
	return smp_load_acquire(&lane->ho_head) - READ_ONCE(lane->ho_tail);
}

/* Account arrivals since the last poll (rate mode). Arrivals that find the
 * RX ring full are lost: the "hardware" drops them. */
static void ppsim_arrivals(struct ppsim_lane *lane, u64 now, u32 rate)
{
	u64 dt = now - lane->last_ns, n, ring = lane->pd->rx_ring;

	lane->last_ns = now;
	if (dt > NSEC_PER_SEC)
		dt = NSEC_PER_SEC;
	lane->frac += dt * rate;
	n = div64_u64(lane->frac, NSEC_PER_SEC);
	lane->frac -= n * NSEC_PER_SEC;
	lane->pending += n;
	if (lane->pending > ring) {
		WRITE_ONCE(lane->st.drops_ring, lane->st.drops_ring + lane->pending - ring);
		lane->pending = ring;
	}
}

static int ppsim_poll(struct napi_struct *napi, int budget)
{
	struct ppsim_lane *lane = container_of(napi, struct ppsim_lane, napi);
	struct ppsim_dev *pd = lane->pd;
	u32 rate = READ_ONCE(pd->rate_pps), pace = READ_ONCE(pd->pace_scale);
	u64 now = ktime_get_ns(), slow, n, i;
	bool done_modelled = false;
	int done = 0;

	if (lane->in_stall) {
		if (now < lane->stall_until) {
			if (rate)
				ppsim_arrivals(lane, now, rate);
			napi_complete_done(napi, 0);
			ppsim_arm(lane, lane->stall_until - now);
			return 0;
		}
		lane->in_stall = false;
		ppsim_uncharge();
	}

	if (!READ_ONCE(pd->running) || !budget) {
		napi_complete_done(napi, 0);
		return 0;
	}

	if (pace) {
		u64 wait = ppsim_pace(lane, now, pace);

		if (wait) {
			if (rate)
				ppsim_arrivals(lane, now, rate);
			napi_complete_done(napi, 0);
			ppsim_arm(lane, wait);
			return 0;
		}
	}

	if (rate) {
		ppsim_arrivals(lane, now, rate);
		n = min_t(u64, lane->pending, budget);
	} else {
		n = budget;
	}

	/* Pair with ppsim_release(): never allocate while a burst returns. */
	WRITE_ONCE(lane->producing, 1);
	smp_mb();
	if (READ_ONCE(lane->returning)) {
		smp_store_release(&lane->producing, 0);
		napi_complete_done(napi, 0);
		ppsim_arm(lane, 20 * NSEC_PER_USEC);
		return 0;
	}

	lane->napi_cpu = smp_processor_id();
	lane->polls++;
	if (!rate) {
		/* Unlimited: receive as fast as the consumer keeps up: one burst
		 * at a time. When the consumer holds a whole burst, back off
		 * until it has returned it (no arrivals are modelled, so nothing
		 * is dropped). With the atomic return this makes the sequence of
		 * allocations and returns the same on every run: receive a
		 * burst, return it, repeat. */
		unsigned long limit = clamp_t(u32, READ_ONCE(pd->burst_pages), 1,
					      PPSIM_BURST_MAX);

		if (ho_count(lane) >= limit) {
			smp_store_release(&lane->producing, 0);
			napi_complete_done(napi, 0);
			ppsim_arm(lane, 50 * NSEC_PER_USEC);
			return 0;
		}
		n = min_t(u64, n, limit - ho_count(lane));
	}

	for (i = 0; i < n; i++) {
		unsigned long head = lane->ho_head;
		struct page *page;

		if (head - READ_ONCE(lane->ho_tail) >= PPSIM_HANDOFF) {
			WRITE_ONCE(lane->st.drops_backlog, lane->st.drops_backlog + 1);
			continue;
		}
		page = page_pool_dev_alloc_pages(lane->pool);
		if (!page) {
			WRITE_ONCE(lane->st.alloc_fail, lane->st.alloc_fail + 1);
			continue;
		}
		if (lane->nposted) {
			/* The packet lands in the oldest posted buffer; the fresh
			 * page is posted in its place. */
			swap(page, lane->posted[lane->post_idx]);
			if (++lane->post_idx == lane->nposted)
				lane->post_idx = 0;
		}
		lane->ho[head & (PPSIM_HANDOFF - 1)].page = page;
		lane->ho[head & (PPSIM_HANDOFF - 1)].pool = lane->pool;
		smp_store_release(&lane->ho_head, head + 1);
		WRITE_ONCE(lane->st.packets, lane->st.packets + 1);
		WRITE_ONCE(lane->st.bytes, lane->st.bytes + PAGE_SIZE);
		done++;
	}
	if (rate)
		lane->pending -= n;
	smp_store_release(&lane->producing, 0);

	if (ho_count(lane) >= READ_ONCE(pd->burst_pages) && wq_has_sleeper(&lane->wq))
		wake_up(&lane->wq);

	/* Charge the slow-path refills this poll caused. */
	slow = READ_ONCE(lane->pool->alloc_stats.slow);
	if (slow != lane->last_slow) {
		u64 events = slow - lane->last_slow;
		u32 cost_us = READ_ONCE(pd->slow_cost_us);

		lane->last_slow = slow;
		WRITE_ONCE(lane->st.slow_events, lane->st.slow_events + events);
		/* The model counts the refills from the pages the pool lost
		 * (ppsim_release), not this counter: with several queues a
		 * bulk allocation sometimes comes back short, which adds slow
		 * events at random. */
		ppsim_model(lane, done, 0, 0);
		done_modelled = true;
		if (cost_us && !pace) {
			u64 c = min_t(u64, cost_us, PPSIM_MAX_COST_US) * NSEC_PER_USEC * events;

			lane->stall_until = ppsim_charge(lane, &lane->cap_producer, c, now);
			lane->in_stall = true;
			napi_complete_done(napi, done);
			ppsim_arm(lane, lane->stall_until > now ? lane->stall_until - now : 0);
			return min_t(int, done, budget - 1);
		}
	}

	if (!done_modelled)
		ppsim_model(lane, done, 0, 0);

	if (!rate)
		return budget;	/* unlimited: keep polling */

	if (lane->pending >= (u64)budget)
		return budget;
	napi_complete_done(napi, done);
	/* come back when about one budget worth has arrived */
	ppsim_arm(lane, clamp_t(u64, div_u64((u64)budget * NSEC_PER_SEC, rate),
				20 * NSEC_PER_USEC, 10 * NSEC_PER_MSEC));
	return done < budget ? done : budget - 1;
}

static void ppsim_kick_fn(void *arg)
{
	struct ppsim_lane *lane = arg;

	napi_schedule(&lane->napi);
}

/* Start the producers on producer_cpu (the NAPI then stays there: it is
 * rescheduled from its own poll or a pinned timer). */
static void ppsim_kick(struct ppsim_dev *pd)
{
	unsigned int cpu = READ_ONCE(pd->producer_cpu), i;

	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		cpu = cpumask_first(cpu_online_mask);
	for (i = 0; i < pd->nq; i++) {
		pd->lanes[i].last_ns = ktime_get_ns();
		ppsim_pace_start(&pd->lanes[i], pd->lanes[i].last_ns);
		smp_call_function_single(cpu, ppsim_kick_fn, &pd->lanes[i], 1);
	}
}

/* ---- consumer ---------------------------------------------------------- */

static u64 pool_ring_full(struct page_pool *pool)
{
	struct page_pool_stats s = {};

	page_pool_get_stats(pool, &s);
	return s.recycle_stats.ring_full;
}

/*
 * Give one page back to its pool. stack_ref_pct of them (every
 * 100/stack_ref_pct-th, deterministically) come back while "the stack"
 * still holds a reference, as a socket or a cloned skb does: the pool
 * cannot recycle such a page and releases it (recycle.released_refcnt),
 * then the stack's reference frees it to the page allocator. The pool
 * refills from the slow path instead, whatever its ring size: the
 * untunable case.
 */
static bool ppsim_put(struct ppsim_lane *lane, struct ppsim_entry *e)
{
	u32 pct = min_t(u32, READ_ONCE(lane->pd->stack_ref_pct), 100);

	lane->ref_acc += pct;
	if (pct && lane->ref_acc >= 100) {
		lane->ref_acc -= 100;
		get_page(e->page);
		page_pool_put_full_page(e->pool, e->page, false);
		put_page(e->page);
		return true;
	}
	page_pool_put_full_page(e->pool, e->page, false);
	return false;
}

/* Return @n pages from the head of the held set to their pools, charging
 * the release cost for pages that found the recycle ring full. */
static void ppsim_release(struct ppsim_lane *lane, unsigned long n)
{
	struct ppsim_dev *pd = lane->pd;
	unsigned long tail = lane->ho_tail, i;
	struct ppsim_entry last;
	u64 rf0, freed, bulks, released = 0;
	u32 cost_us;

	if (!n)
		return;
	/* Pair with ppsim_poll(): the producer allocates nothing until the
	 * whole burst is back. */
	WRITE_ONCE(lane->returning, 1);
	smp_mb();
	while (READ_ONCE(lane->producing))
		cpu_relax();
	/* The last page keeps its pool alive while we read its counters. */
	last = lane->ho[(tail + n - 1) & (PPSIM_HANDOFF - 1)];
	rf0 = pool_ring_full(last.pool);
	for (i = 0; i < n - 1; i++)
		released += ppsim_put(lane, &lane->ho[(tail + i) & (PPSIM_HANDOFF - 1)]);
	freed = pool_ring_full(last.pool) - rf0;
	released += ppsim_put(lane, &last);

	WRITE_ONCE(lane->st.returned, lane->st.returned + n);
	WRITE_ONCE(lane->st.bursts, lane->st.bursts + 1);
	WRITE_ONCE(lane->st.ring_full_pages, lane->st.ring_full_pages + freed);

	cost_us = READ_ONCE(pd->release_cost_us);
	bulks = DIV_ROUND_UP(freed, PPSIM_BULK);
	WRITE_ONCE(lane->st.release_bulks, lane->st.release_bulks + bulks);
	ppsim_model(lane, 0, bulks, cost_us);
	/* Every page the pool lost (freed past a full ring, released while
	 * referenced) is one it must allocate again from the page allocator:
	 * one slow-path refill per 64 of them, the bulk the pool refills in.
	 * Counted here, per burst, so the figure does not depend on how full
	 * the allocator's per-CPU lists happened to be. */
	ppsim_model(lane, 0, DIV_ROUND_UP(freed + released, PPSIM_BULK),
		    READ_ONCE(pd->slow_cost_us));
	/* The producer is held off: its pages and their cost are all in. */
	atomic64_set(&lane->model_done_pk, READ_ONCE(lane->st.packets));
	atomic64_set(&lane->model_done_ns, atomic64_read(&lane->model_ns));
	smp_store_release(&lane->ho_tail, tail + n);
	smp_store_release(&lane->returning, 0);

	if (cost_us && bulks && !READ_ONCE(pd->pace_scale)) {
		u64 now = ktime_get_ns();
		u64 until = ppsim_charge(lane, &lane->cap_consumer,
			min_t(u64, cost_us, PPSIM_MAX_COST_US) * NSEC_PER_USEC * bulks, now);

		if (until > now) {
			ktime_t to = ns_to_ktime(until - now);

			set_current_state(TASK_UNINTERRUPTIBLE);
			schedule_hrtimeout(&to, HRTIMER_MODE_REL);
		}
		ppsim_uncharge();
	}
}

static int ppsim_consumer(void *arg)
{
	struct ppsim_lane *lane = arg;
	struct ppsim_dev *pd = lane->pd;

	while (!kthread_should_stop()) {
		u32 burst = clamp_t(u32, READ_ONCE(pd->burst_pages), 1, PPSIM_BURST_MAX);
		unsigned long held = ho_count(lane);

		if (held >= burst) {
			u32 hold = READ_ONCE(pd->hold_us);

			if (hold) {
				ktime_t to = ns_to_ktime((u64)hold * NSEC_PER_USEC);

				set_current_state(TASK_INTERRUPTIBLE);
				schedule_hrtimeout(&to, HRTIMER_MODE_REL);
			}
			ppsim_release(lane, burst);
			cond_resched();
			continue;
		}
		/* Traffic stopped: nothing will complete the burst, give back
		 * what is held. */
		if (held && !READ_ONCE(pd->running)) {
			ppsim_release(lane, held);
			continue;
		}
		wait_event_interruptible_timeout(lane->wq,
			kthread_should_stop() || ho_count(lane) >= burst ||
			(!READ_ONCE(pd->running) && ho_count(lane)),
			HZ / 20);
	}
	/* Give everything back before the lane goes away. */
	ppsim_release(lane, ho_count(lane));
	return 0;
}

/* ---- queues ------------------------------------------------------------ */

/* A devmem device's core takes its instance lock around ndo and ethtool
 * ops (it has queue management ops): NAPI calls there must be the _locked
 * variants. Other devices keep the calls that take the lock themselves. */
static void ppsim_napi_add(struct ppsim_lane *lane,
			   int (*poll)(struct napi_struct *napi, int budget))
{
	struct net_device *dev = lane->pd->netdev;

#if PPSIM_DEVMEM
	if (netdev_need_ops_lock(dev)) {
		netif_napi_add_config_locked(dev, &lane->napi, poll, lane->idx);
		return;
	}
#endif
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
	netif_napi_add_config(dev, &lane->napi, poll, lane->idx);
#else
	netif_napi_add(dev, &lane->napi, poll);
#endif
}

static void ppsim_napi_del(struct ppsim_lane *lane)
{
#if PPSIM_DEVMEM
	if (netdev_need_ops_lock(lane->pd->netdev)) {
		netif_napi_del_locked(&lane->napi);
		return;
	}
#endif
	netif_napi_del(&lane->napi);
}

static void ppsim_napi_enable(struct ppsim_lane *lane)
{
#if PPSIM_DEVMEM
	if (netdev_need_ops_lock(lane->pd->netdev)) {
		napi_enable_locked(&lane->napi);
		return;
	}
#endif
	napi_enable(&lane->napi);
}

static void ppsim_napi_disable(struct ppsim_lane *lane)
{
#if PPSIM_DEVMEM
	if (netdev_need_ops_lock(lane->pd->netdev)) {
		napi_disable_locked(&lane->napi);
		return;
	}
#endif
	napi_disable(&lane->napi);
}

/* Give the posted buffers back to their pools (the "device" stops), then
 * the pools: pages still held by the stack keep a pool alive (detached,
 * with detach-time) until they come back. */
static void ppsim_qmem_free(struct ppsim_qmem *m)
{
	struct page_pool *hpool = m->hdr_pool ?: m->pool;
	unsigned int i;

	for (i = 0; m->posted && i < m->nposted; i++)
		if (m->posted[i])
			page_pool_put_full_page(hpool, m->posted[i], false);
	for (i = 0; m->dposted && i < m->nposted; i++)
		if (m->dposted[i])
			page_pool_put_full_netmem(m->pool, m->dposted[i], false);
	kvfree(m->posted);
	kvfree(m->dposted);
	kvfree(m->wire_len);
	kvfree(m->wire_hlen);
	if (m->hdr_pool)
		page_pool_destroy(m->hdr_pool);
	if (m->pool)
		page_pool_destroy(m->pool);
	memset(m, 0, sizeof(*m));
}

/* Build a queue's memory: its pool and its posted RX ring (at most
 * PPSIM_RING_MAX buffers, so pool memory grows with the ring as on
 * hardware and the posted pages count in the pool's inflight). On a
 * devmem device whose queue has a memory provider bound, header split:
 * the payload pool is created for unreadable memory on the queue (the
 * provider's net_iovs), a second pool of host pages takes the headers.
 * Nothing uses the pools before the queue starts. With @napi false the
 * pools are not tied to the queue's NAPI yet (a restart builds them while
 * that NAPI runs the old queue): ppsim_queue_start ties them. */
static int ppsim_qmem_alloc(struct ppsim_lane *lane, struct ppsim_qmem *m, bool napi)
{
	struct ppsim_dev *pd = lane->pd;
	struct net_device *dev = pd->netdev;
	struct page_pool_params pp = {
		.order = 0,
		.pool_size = pd->pers->pool(pd->pool_ring, dev->mtu),
		.nid = NUMA_NO_NODE,
		.dev = &dev->dev,
		.napi = napi ? &lane->napi : NULL,
		.netdev = dev,
		.dma_dir = DMA_FROM_DEVICE,
	};
	unsigned int n = min_t(u32, pd->rx_ring, PPSIM_RING_MAX), i;
#if PPSIM_DEVMEM
	bool split = pd->devmem && netif_rxq_has_unreadable_mp(dev, lane->idx);
#else
	bool split = false;
#endif
	struct page_pool *pool;
	int err = -ENOMEM;

	memset(m, 0, sizeof(*m));
	/* Only the wire writes into net_iovs; the engine hands pages to a
	 * consumer that would read them. */
	if (split && !pd->wired)
		return -EOPNOTSUPP;
	ppsim_dma_pool_params(&pp);
	if (split) {
		pool = page_pool_create(&pp);
		if (IS_ERR(pool))
			return PTR_ERR(pool);
		m->hdr_pool = pool;
	}
#if PPSIM_DEVMEM
	if (pd->devmem) {
		pp.flags |= PP_FLAG_ALLOW_UNREADABLE_NETMEM;
		pp.queue_idx = lane->idx;
	}
#endif
	pool = page_pool_create(&pp);
	if (IS_ERR(pool)) {
		err = PTR_ERR(pool);
		goto fail;
	}
	m->pool = pool;
	m->dma_mapped = pp.flags & PP_FLAG_DMA_MAP;
	if (split != !!pool->mp_ops) {
		err = -EINVAL;
		goto fail;
	}

	m->posted = kvcalloc(n, sizeof(*m->posted), GFP_KERNEL);
	if (!m->posted)
		goto fail;
	m->nposted = n;
	if (split) {
		m->dposted = kvcalloc(n, sizeof(*m->dposted), GFP_KERNEL);
		m->wire_hlen = kvcalloc(n, sizeof(*m->wire_hlen), GFP_KERNEL);
		if (!m->dposted || !m->wire_hlen)
			goto fail;
	}
	if (pd->wired) {
		m->wire_len = kvcalloc(n, sizeof(*m->wire_len), GFP_KERNEL);
		if (!m->wire_len)
			goto fail;
	}
	for (i = 0; i < n; i++) {
		m->posted[i] = page_pool_alloc_pages(m->hdr_pool ?: m->pool,
						     GFP_KERNEL | __GFP_NOWARN);
		if (!m->posted[i])
			goto fail;
		if (split) {
			m->dposted[i] = page_pool_alloc_netmems(m->pool, GFP_KERNEL | __GFP_NOWARN);
			if (!m->dposted[i])
				goto fail;
		}
	}
	return 0;
fail:
	ppsim_qmem_free(m);
	return err;
}

/* The queue takes @m's memory (stopped, NAPI not enabled yet). */
static void ppsim_qmem_install(struct ppsim_lane *lane, struct ppsim_qmem *m)
{
	lane->pool = m->pool;
	lane->hdr_pool = m->hdr_pool;
	lane->dma_mapped = m->dma_mapped;
	lane->posted = m->posted;
	lane->dposted = m->dposted;
	lane->nposted = m->nposted;
	lane->post_idx = 0;
	lane->wire_len = m->wire_len;
	lane->wire_hlen = m->wire_hlen;
	lane->wire_prod = 0;
	lane->wire_cons = 0;
	lane->last_slow = READ_ONCE(m->pool->alloc_stats.slow);
	memset(m, 0, sizeof(*m));
}

/* The stopped queue gives its memory to @m. */
static void ppsim_qmem_take(struct ppsim_lane *lane, struct ppsim_qmem *m)
{
	m->pool = lane->pool;
	m->hdr_pool = lane->hdr_pool;
	m->dma_mapped = lane->dma_mapped;
	m->posted = lane->posted;
	m->dposted = lane->dposted;
	m->nposted = lane->nposted;
	m->wire_len = lane->wire_len;
	m->wire_hlen = lane->wire_hlen;
	lane->pool = NULL;
	lane->hdr_pool = NULL;
	lane->posted = NULL;
	lane->dposted = NULL;
	lane->nposted = 0;
	lane->post_idx = 0;
	lane->wire_len = NULL;
	lane->wire_hlen = NULL;
}

static int ppsim_lane_open(struct ppsim_lane *lane)
{
	struct ppsim_dev *pd = lane->pd;
	struct net_device *dev = pd->netdev;
	struct ppsim_qmem m;
	int err;

	ppsim_napi_add(lane, pd->wired ? ppsim_wire_poll : ppsim_poll);
	lane->napi_added = true;
	err = ppsim_qmem_alloc(lane, &m, true);
	if (err) {
		ppsim_napi_del(lane);
		lane->napi_added = false;
		return err;
	}
	ppsim_qmem_install(lane, &m);
	lane->pending = 0;
	lane->frac = 0;
	lane->in_stall = false;
	netif_queue_set_napi(dev, lane->idx, NETDEV_QUEUE_TYPE_RX, &lane->napi);
	ppsim_napi_enable(lane);
	if (pd->wired)
		ppsim_wire_lane_start(lane);
	return 0;
}

static void ppsim_lane_close(struct ppsim_lane *lane)
{
	struct net_device *dev = lane->pd->netdev;
	struct ppsim_qmem m;

	if (!lane->napi_added)
		return;
	netif_queue_set_napi(dev, lane->idx, NETDEV_QUEUE_TYPE_RX, NULL);
	ppsim_napi_disable(lane);
	hrtimer_cancel(&lane->timer);
	if (lane->in_stall) {
		lane->in_stall = false;
		ppsim_uncharge();
	}
	ppsim_napi_del(lane);
	lane->napi_added = false;
	ppsim_qmem_take(lane, &m);
	ppsim_qmem_free(&m);
}

#if PPSIM_DEVMEM
/* ---- queue management ops (devmem devices) ------------------------------ */

/* The core restarts one RX queue with new memory (a memory provider bound
 * or unbound, netdev_rx_queue_restart): build the new pools while the old
 * queue runs, stop it (the wire stops writing into it, NAPI disabled), give
 * it the new memory and start it. The queue's NAPI stays. Only while up:
 * a down device builds its queues, with the provider, at open. */
static int ppsim_queue_mem_alloc(struct net_device *dev, struct netdev_queue_config *qcfg,
				 void *per_queue_mem, int idx)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	if (!pd->up)
		return -ENETDOWN;
	return ppsim_qmem_alloc(&pd->lanes[idx], per_queue_mem, false);
}

static void ppsim_queue_mem_free(struct net_device *dev, void *per_queue_mem)
{
	ppsim_qmem_free(per_queue_mem);
}

static int ppsim_queue_start(struct net_device *dev, struct netdev_queue_config *qcfg,
			     void *per_queue_mem, int idx)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	struct ppsim_lane *lane = &pd->lanes[idx];

	netdev_assert_locked(dev);
	ppsim_qmem_install(lane, per_queue_mem);
	page_pool_enable_direct_recycling(lane->pool, &lane->napi);
	if (lane->hdr_pool)
		page_pool_enable_direct_recycling(lane->hdr_pool, &lane->napi);
	ppsim_napi_enable(lane);
	if (pd->wired)
		ppsim_wire_lane_start(lane);
	return 0;
}

static int ppsim_queue_stop(struct net_device *dev, void *per_queue_mem, int idx)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	struct ppsim_lane *lane = &pd->lanes[idx];

	netdev_assert_locked(dev);
	if (pd->wired)
		ppsim_wire_lane_quiesce(lane);
	ppsim_napi_disable(lane);
	/* The NAPI stays with the queue: the old pools let go of it while it
	 * is disabled (they are destroyed after the new ones started). */
	page_pool_disable_direct_recycling(lane->pool);
	if (lane->hdr_pool)
		page_pool_disable_direct_recycling(lane->hdr_pool);
	ppsim_qmem_take(lane, per_queue_mem);
	return 0;
}

static const struct netdev_queue_mgmt_ops ppsim_queue_mgmt_ops = {
	.ndo_queue_mem_size = sizeof(struct ppsim_qmem),
	.ndo_queue_mem_alloc = ppsim_queue_mem_alloc,
	.ndo_queue_mem_free = ppsim_queue_mem_free,
	.ndo_queue_start = ppsim_queue_start,
	.ndo_queue_stop = ppsim_queue_stop,
};
#endif

static void ppsim_queues_close(struct ppsim_dev *pd)
{
	unsigned int i;

	if (pd->wired)
		ppsim_wire_quiesce(pd);
	for (i = 0; i < pd->nq; i++)
		ppsim_lane_close(&pd->lanes[i]);
}

static int ppsim_queues_open(struct ppsim_dev *pd)
{
	unsigned int i;
	int err;

	for (i = 0; i < pd->nq; i++) {
		err = ppsim_lane_open(&pd->lanes[i]);
		if (err) {
			while (i--)
				ppsim_lane_close(&pd->lanes[i]);
			return err;
		}
	}
	if (READ_ONCE(pd->running))
		ppsim_kick(pd);
	return 0;
}

static int ppsim_open(struct net_device *dev)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	int err;

	pd->pool_ring = pd->rx_ring;
	err = ppsim_queues_open(pd);
	if (err)
		return err;
	pd->up = true;
	if (pd->wired)
		ppsim_wire_carrier(pd, true);
	else
		netif_carrier_on(dev);
	netif_tx_start_all_queues(dev);
	return 0;
}

static int ppsim_stop(struct net_device *dev)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	netif_tx_stop_all_queues(dev);
	netif_carrier_off(dev);
	if (pd->wired)
		ppsim_wire_carrier(pd, false);
	pd->up = false;
	ppsim_queues_close(pd);
	return 0;
}

static netdev_tx_t ppsim_xmit(struct sk_buff *skb, struct net_device *dev)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	if (READ_ONCE(pd->wired))
		return ppsim_wire_xmit(skb, dev);
	/* Nothing is wired to the other end: count and drop. */
	WRITE_ONCE(pd->tx_packets, pd->tx_packets + 1);
	WRITE_ONCE(pd->tx_bytes, pd->tx_bytes + skb->len);
	dev_kfree_skb_any(skb);
	return NETDEV_TX_OK;
}

static void ppsim_get_stats64(struct net_device *dev, struct rtnl_link_stats64 *s)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	unsigned int i;

	s->rx_packets = pd->base.packets;
	s->rx_bytes = pd->base.bytes;
	s->rx_dropped = lane_total(&pd->base);
	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		const struct ppsim_lane_stats *st = &pd->lanes[i].st;

		s->rx_packets += READ_ONCE(st->packets);
		s->rx_bytes += READ_ONCE(st->bytes);
		s->rx_dropped += READ_ONCE(st->drops_ring) + READ_ONCE(st->drops_backlog) +
				 READ_ONCE(st->alloc_fail);
	}
	s->tx_packets = READ_ONCE(pd->tx_packets);
	s->tx_bytes = READ_ONCE(pd->tx_bytes);
	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		const struct ppsim_lane *l = &pd->lanes[i];

		s->rx_missed_errors += READ_ONCE(l->st.overruns);
		s->tx_packets += READ_ONCE(l->tx_packets);
		s->tx_bytes += READ_ONCE(l->tx_bytes);
		s->tx_dropped += READ_ONCE(l->tx_drops);
	}
}

static const struct net_device_ops ppsim_netdev_ops = {
	.ndo_open = ppsim_open,
	.ndo_stop = ppsim_stop,
	.ndo_start_xmit = ppsim_xmit,
	.ndo_get_stats64 = ppsim_get_stats64,
	.ndo_set_mac_address = eth_mac_addr,
	.ndo_validate_addr = eth_validate_addr,
	.ndo_get_iflink = ppsim_wire_get_iflink,
};

/* ---- qstats ------------------------------------------------------------ */

static void ppsim_qstats_rx(struct net_device *dev, int idx,
			    struct netdev_queue_stats_rx *rx)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	const struct ppsim_lane_stats *st = &pd->lanes[idx].st;

	rx->packets = READ_ONCE(st->packets);
	rx->bytes = READ_ONCE(st->bytes);
	rx->alloc_fail = READ_ONCE(st->alloc_fail);
	rx->hw_drops = READ_ONCE(st->drops_ring);
	rx->hw_drop_overruns = READ_ONCE(st->overruns);
}

static void ppsim_qstats_tx(struct net_device *dev, int idx,
			    struct netdev_queue_stats_tx *tx)
{
	struct ppsim_lane *l = &((struct ppsim_dev *)netdev_priv(dev))->lanes[idx];

	/* Unwired transmits are counted in the base (not spread); a wired
	 * queue counts its own. */
	tx->packets = READ_ONCE(l->tx_packets);
	tx->bytes = READ_ONCE(l->tx_bytes);
	tx->hw_drops = READ_ONCE(l->tx_drops);
}

static void ppsim_qstats_base(struct net_device *dev,
			      struct netdev_queue_stats_rx *rx,
			      struct netdev_queue_stats_tx *tx)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	unsigned int i;

	rx->packets = pd->base.packets;
	rx->bytes = pd->base.bytes;
	rx->alloc_fail = pd->base.alloc_fail;
	rx->hw_drops = pd->base.drops_ring;
	rx->hw_drop_overruns = pd->base.overruns;
	tx->packets = READ_ONCE(pd->tx_packets);
	tx->bytes = READ_ONCE(pd->tx_bytes);
	tx->hw_drops = 0;
	/* Lanes above the active count keep their history until folded. */
	for (i = pd->netdev->real_num_rx_queues; i < PPSIM_MAX_QUEUES; i++) {
		const struct ppsim_lane_stats *st = &pd->lanes[i].st;

		rx->packets += READ_ONCE(st->packets);
		rx->bytes += READ_ONCE(st->bytes);
		rx->alloc_fail += READ_ONCE(st->alloc_fail);
		rx->hw_drops += READ_ONCE(st->drops_ring);
		rx->hw_drop_overruns += READ_ONCE(st->overruns);
	}
	for (i = pd->netdev->real_num_tx_queues; i < PPSIM_MAX_QUEUES; i++) {
		tx->packets += READ_ONCE(pd->lanes[i].tx_packets);
		tx->bytes += READ_ONCE(pd->lanes[i].tx_bytes);
		tx->hw_drops += READ_ONCE(pd->lanes[i].tx_drops);
	}
}

static const struct netdev_stat_ops ppsim_stat_ops = {
	.get_queue_stats_rx = ppsim_qstats_rx,
	.get_queue_stats_tx = ppsim_qstats_tx,
	.get_base_stats = ppsim_qstats_base,
};

/* ---- ethtool ----------------------------------------------------------- */

static void ppsim_get_drvinfo(struct net_device *dev, struct ethtool_drvinfo *info)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	strscpy(info->driver, pd->pers->driver, sizeof(info->driver));
	strscpy(info->fw_version, PPSIM_FW_VERSION, sizeof(info->fw_version));
}

/* A 100G link while the device is up with its carrier on (a wired
 * device's peer up too), none otherwise: what a NIC's link settings say. */
static int ppsim_get_link_ksettings(struct net_device *dev,
				    struct ethtool_link_ksettings *ks)
{
	ethtool_link_ksettings_zero_link_mode(ks, supported);
	ethtool_link_ksettings_zero_link_mode(ks, advertising);
	ks->base.port = PORT_OTHER;
	ks->base.autoneg = AUTONEG_DISABLE;
	if (netif_running(dev) && netif_carrier_ok(dev)) {
		ks->base.speed = SPEED_100000;
		ks->base.duplex = DUPLEX_FULL;
	} else {
		ks->base.speed = SPEED_UNKNOWN;
		ks->base.duplex = DUPLEX_UNKNOWN;
	}
	return 0;
}

static void ppsim_get_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
				struct kernel_ethtool_ringparam *kring,
				struct netlink_ext_ack *extack)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	ring->rx_max_pending = pd->pers->ring_max;
	ring->tx_max_pending = PPSIM_RING_MAX;
	ring->rx_pending = pd->rx_ring;
	ring->tx_pending = PPSIM_RING_DEFAULT;
	if (pd->pers->jumbo)
		pd->pers->jumbo(pd->rx_ring, &ring->rx_jumbo_pending,
				&ring->rx_jumbo_max_pending);
}

/* `refuse_sets`: a driver that refuses every change (a firmware that is
 * busy, a device in recovery), with an extack message; counted in
 * `refused` so a test reads the attempts from the kernel side. */
static int ppsim_refusing(struct ppsim_dev *pd, struct netlink_ext_ack *extack)
{
	if (!READ_ONCE(pd->refuse_sets))
		return 0;
	pd->refused++;
	NL_SET_ERR_MSG(extack, "ppsim: refuse_sets is on: every ring and channel change is refused");
	return -EBUSY;
}

/* Rebuild the queues the way a real driver does on a ring or channel
 * change: tear everything down (pools destroyed, lingering while pages are
 * out), apply, build new queues with new pools. Called under RTNL. */
static int ppsim_reconfigure(struct ppsim_dev *pd, unsigned int ring, unsigned int nq,
			     struct netlink_ext_ack *extack)
{
	unsigned int old_ring = pd->rx_ring, old_nq = pd->nq;
	bool up = pd->up;
	int err;

	if (up)
		ppsim_queues_close(pd);
	pd->pool_ring = ppsim_personality_pool_ring(pd->pers, up, old_ring, ring);
	pd->rx_ring = ring;
	if (nq != old_nq) {
		err = netif_set_real_num_rx_queues(pd->netdev, nq);
		if (!err)
			err = netif_set_real_num_tx_queues(pd->netdev, nq);
		if (err) {
			NL_SET_ERR_MSG(extack, "ppsim: cannot change the queue count");
			netif_set_real_num_rx_queues(pd->netdev, old_nq);
			netif_set_real_num_tx_queues(pd->netdev, old_nq);
			nq = old_nq;
		} else {
			pd->nq = nq;
		}
	} else {
		err = 0;
	}
	if (up) {
		int err2 = ppsim_queues_open(pd);

		if (err2) {
			NL_SET_ERR_MSG(extack, "ppsim: cannot create the new queues");
			pd->rx_ring = old_ring;
			pd->pool_ring = old_ring;
			if (!ppsim_queues_open(pd))
				return err2;
			pd->up = false;
			return err2;
		}
	}
	return err;
}

static int ppsim_set_ringparam(struct net_device *dev, struct ethtool_ringparam *ring,
			       struct kernel_ethtool_ringparam *kring,
			       struct netlink_ext_ack *extack)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	u32 rx;
	int err;

	err = ppsim_refusing(pd, extack);
	if (err)
		return err;
	if (ring->rx_pending < pd->pers->ring_min) {
		if (pd->pers == &ppsim_personalities[0])
			NL_SET_ERR_MSG_FMT(extack, "ppsim: rx ring must be at least %u",
					   PPSIM_RING_MIN);
		return -EINVAL;
	}
	err = pd->pers->ring(ring->rx_pending, &rx, extack);
	if (err)
		return err;
	rx = min(rx, pd->pers->ring_max);
	if (rx == pd->rx_ring)
		return 0;
	return ppsim_reconfigure(pd, rx, pd->nq, extack);
}

static void ppsim_get_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct ppsim_dev *pd = netdev_priv(dev);

	ch->max_combined = PPSIM_MAX_QUEUES;
	ch->combined_count = pd->nq;
}

static int ppsim_set_channels(struct net_device *dev, struct ethtool_channels *ch)
{
	struct ppsim_dev *pd = netdev_priv(dev);
	int err;

	err = ppsim_refusing(pd, NULL);
	if (err)
		return err;
	if (ch->rx_count || ch->tx_count || !ch->combined_count)
		return -EINVAL;
	if (ch->combined_count == pd->nq)
		return 0;
	return ppsim_reconfigure(pd, pd->rx_ring, ch->combined_count, NULL);
}

static const struct ethtool_ops ppsim_ethtool_ops = {
	.get_drvinfo = ppsim_get_drvinfo,
	.get_link = ethtool_op_get_link,
	.get_link_ksettings = ppsim_get_link_ksettings,
	.get_ringparam = ppsim_get_ringparam,
	.set_ringparam = ppsim_set_ringparam,
	.get_channels = ppsim_get_channels,
	.set_channels = ppsim_set_channels,
};

#if PPSIM_DEVMEM
/* A devmem device also has header split: tcp-data-split and hds-thresh
 * (at most 0: every TCP payload is split from its headers), which the
 * core keeps in dev->cfg and checks before it binds a memory provider. */
static const struct ethtool_ops ppsim_devmem_ethtool_ops = {
	.supported_ring_params = ETHTOOL_RING_USE_TCP_DATA_SPLIT | ETHTOOL_RING_USE_HDS_THRS,
	.get_drvinfo = ppsim_get_drvinfo,
	.get_link = ethtool_op_get_link,
	.get_link_ksettings = ppsim_get_link_ksettings,
	.get_ringparam = ppsim_get_ringparam,
	.set_ringparam = ppsim_set_ringparam,
	.get_channels = ppsim_get_channels,
	.set_channels = ppsim_set_channels,
};
#endif

/* ---- debugfs control --------------------------------------------------- */

/* `personality`: which driver family the device behaves like
 * (ppsim_personality.h). Only while the device is down; the RX ring goes to
 * the personality's default. */
static ssize_t ppsim_personality_write(struct file *f, const char __user *ubuf,
				       size_t len, loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	const struct ppsim_personality *p;
	char buf[32];
	int err;
	ssize_t ret = len;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	p = ppsim_personality_find(buf);
	if (!p)
		return -EINVAL;
	rtnl_lock();
	if (pd->up) {
		ret = -EBUSY;
	} else {
		pd->pers = p;
		pd->rx_ring = p->ring_default;
		pd->pool_ring = p->ring_default;
	}
	rtnl_unlock();
	return ret;
}

static ssize_t ppsim_personality_read(struct file *f, char __user *ubuf, size_t len,
				      loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	char buf[32];
	int n;

	n = scnprintf(buf, sizeof(buf), "%s\n", READ_ONCE(pd->pers)->name);
	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static const struct file_operations ppsim_personality_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ppsim_personality_read,
	.write = ppsim_personality_write,
	.llseek = default_llseek,
};

struct ppsim_preset {
	const char *name;
	u32 slow_cost_us;
	u32 release_cost_us;
};

/* Calibration: see README.md ("Cost presets"). */
static const struct ppsim_preset ppsim_presets[] = {
	{ "off", 0, 0 },
	{ "zonelock", 40, 40 },
	{ "devmem", 100, 2500 },
};

static ssize_t ppsim_running_write(struct file *f, const char __user *ubuf,
				   size_t len, loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	bool on;
	int err;

	err = kstrtobool_from_user(ubuf, len, &on);
	if (err)
		return err;
	rtnl_lock();
	if (on && pd->wired) {
		/* a wire carries real frames: no engine, no modelled cost */
		rtnl_unlock();
		return -EBUSY;
	}
	if (on && !pd->running) {
		u64 drops = lane_total(&pd->base), pk = pd->base.packets;
		unsigned int i;

		for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
			pk += READ_ONCE(pd->lanes[i].st.packets);
			drops += lane_total(&pd->lanes[i].st);
		}
		pd->gp_base_packets = pk;
		pd->gp_base_drops = drops;
		pd->gp_start_ns = ktime_get_ns();
		WRITE_ONCE(pd->running, 1);
		if (pd->up)
			ppsim_kick(pd);
	} else if (!on && pd->running) {
		unsigned int i;

		WRITE_ONCE(pd->running, 0);
		for (i = 0; i < PPSIM_MAX_QUEUES; i++)
			wake_up(&pd->lanes[i].wq);
	}
	rtnl_unlock();
	return len;
}

static ssize_t ppsim_running_read(struct file *f, char __user *ubuf, size_t len,
				  loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	char buf[8];
	int n = scnprintf(buf, sizeof(buf), "%u\n", READ_ONCE(pd->running));

	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static const struct file_operations ppsim_running_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ppsim_running_read,
	.write = ppsim_running_write,
	.llseek = default_llseek,
};

static ssize_t ppsim_preset_write(struct file *f, const char __user *ubuf,
				  size_t len, loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	char buf[32], *name;
	int err;
	size_t i;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	name = strim(buf);
	for (i = 0; i < ARRAY_SIZE(ppsim_presets); i++) {
		if (!strcmp(name, ppsim_presets[i].name)) {
			WRITE_ONCE(pd->slow_cost_us, ppsim_presets[i].slow_cost_us);
			WRITE_ONCE(pd->release_cost_us, ppsim_presets[i].release_cost_us);
			return len;
		}
	}
	return -EINVAL;
}

static ssize_t ppsim_preset_read(struct file *f, char __user *ubuf, size_t len,
				 loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	const char *name = "custom";
	char buf[64];
	size_t i;
	int n;

	for (i = 0; i < ARRAY_SIZE(ppsim_presets); i++)
		if (READ_ONCE(pd->slow_cost_us) == ppsim_presets[i].slow_cost_us &&
		    READ_ONCE(pd->release_cost_us) == ppsim_presets[i].release_cost_us) {
			name = ppsim_presets[i].name;
			break;
		}
	n = scnprintf(buf, sizeof(buf), "%s\n", name);
	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static const struct file_operations ppsim_preset_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ppsim_preset_read,
	.write = ppsim_preset_write,
	.llseek = default_llseek,
};

/* `consumer_cpu`: move every consumer kthread to another online CPU (the
 * producer's, to reproduce a consumer that falls behind now and then). */
static ssize_t ppsim_consumer_cpu_write(struct file *f, const char __user *ubuf,
					size_t len, loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	unsigned int cpu, i;
	int err;

	err = kstrtouint_from_user(ubuf, len, 10, &cpu);
	if (err)
		return err;
	if (cpu >= nr_cpu_ids || !cpu_online(cpu))
		return -EINVAL;
	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		if (!pd->lanes[i].consumer)
			continue;
		err = set_cpus_allowed_ptr(pd->lanes[i].consumer, cpumask_of(cpu));
		if (err)
			return err;
	}
	WRITE_ONCE(pd->consumer_cpu, cpu);
	return len;
}

static ssize_t ppsim_consumer_cpu_read(struct file *f, char __user *ubuf, size_t len,
				       loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	char buf[16];
	int n = scnprintf(buf, sizeof(buf), "%u\n", READ_ONCE(pd->consumer_cpu));

	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static const struct file_operations ppsim_consumer_cpu_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ppsim_consumer_cpu_read,
	.write = ppsim_consumer_cpu_write,
	.llseek = default_llseek,
};

static int ppsim_goodput_show(struct seq_file *m, void *v)
{
	struct ppsim_dev *pd = m->private;
	u64 pk = pd->base.packets, drops = lane_total(&pd->base), charged = 0, model = 0;
	u64 done_ns = 0, done_pk = 0;
	u64 now = ktime_get_ns(), el, dpk, dd;
	unsigned int i;

	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		pk += READ_ONCE(pd->lanes[i].st.packets);
		drops += lane_total(&pd->lanes[i].st);
		charged += atomic64_read(&pd->lanes[i].charged_ns);
		model += atomic64_read(&pd->lanes[i].model_ns);
		done_ns += atomic64_read(&pd->lanes[i].model_done_ns);
		done_pk += atomic64_read(&pd->lanes[i].model_done_pk);
	}
	el = pd->gp_start_ns ? now - pd->gp_start_ns : 0;
	dpk = pk - pd->gp_base_packets;
	dd = drops - pd->gp_base_drops;
	seq_printf(m, "now_ns=%llu delivered=%llu dropped=%llu charged_ns=%llu "
		   "window_ns=%llu window_delivered=%llu window_dropped=%llu goodput_pps=%llu "
		   "model_ns=%llu queues=%u rate_pps=%u line_pps=%u model_done_ns=%llu "
		   "model_done_pk=%llu\n",
		   now, pk, drops, charged, el, dpk, dd,
		   el ? div64_u64(dpk * NSEC_PER_SEC, el) : 0, model, READ_ONCE(pd->nq),
		   READ_ONCE(pd->rate_pps), READ_ONCE(pd->line_pps), done_ns, done_pk);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ppsim_goodput);

/* `steer`: "PORT QUEUE" — TCP segments the wire brings to destination
 * port PORT go to RX queue QUEUE (an ntuple rule, as `ethtool -N ...
 * flow-type tcp4 dst-port PORT action QUEUE` sets on a NIC: how a devmem
 * flow reaches the queue its dma-buf is bound to); "0 0" removes it. */
static ssize_t ppsim_steer_write(struct file *f, const char __user *ubuf, size_t len,
				 loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	unsigned int port, queue;
	char buf[32];
	int err;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	if (sscanf(buf, "%u %u", &port, &queue) != 2 || port > 0xffff ||
	    queue >= PPSIM_MAX_QUEUES || (!port && queue))
		return -EINVAL;
	WRITE_ONCE(pd->steer, port ? queue << 16 | port : 0);
	return len;
}

static ssize_t ppsim_steer_read(struct file *f, char __user *ubuf, size_t len,
				loff_t *ppos)
{
	struct ppsim_dev *pd = file_inode(f)->i_private;
	u32 rule = READ_ONCE(pd->steer);
	char buf[32];
	int n = scnprintf(buf, sizeof(buf), "%u %u\n", rule & 0xffff, rule >> 16);

	return simple_read_from_buffer(ubuf, len, ppos, buf, n);
}

static const struct file_operations ppsim_steer_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = ppsim_steer_read,
	.write = ppsim_steer_write,
	.llseek = default_llseek,
};

static int ppsim_qstate_show(struct seq_file *m, void *v)
{
	struct ppsim_dev *pd = m->private;
	unsigned int i;

	rtnl_lock();
#if PPSIM_DEVMEM
	/* a devmem device restarts queues under its instance lock only */
	netdev_lock_ops(pd->netdev);
#endif
	for (i = 0; i < pd->nq; i++) {
		struct ppsim_lane *l = &pd->lanes[i];
		const struct ppsim_lane_stats *st = &l->st;

		seq_printf(m, "queue=%u ring=%u pool_id=%u napi_id=%u napi_cpu=%d polls=%llu "
			   "held=%lu packets=%llu bytes=%llu alloc_fail=%llu drops_ring=%llu drops_backlog=%llu "
			   "returned=%llu bursts=%llu slow_events=%llu ring_full_pages=%llu "
			   "charged_ns=%llu capped=%llu pool_size=%d posted=%u release_bulks=%llu "
			   "model_ns=%lld pace_behind_ns=%lld overruns=%llu wire_filled=%u "
			   "mp_allocs=%llu mp_alloc_ns=%llu mp_alloc_max_ns=%llu\n",
			   i, pd->rx_ring, l->pool ? l->pool->user.id : 0,
			   l->napi_added ? l->napi.napi_id : 0, READ_ONCE(l->napi_cpu),
			   READ_ONCE(l->polls), ho_count(l),
			   READ_ONCE(st->packets), READ_ONCE(st->bytes),
			   READ_ONCE(st->alloc_fail), READ_ONCE(st->drops_ring),
			   READ_ONCE(st->drops_backlog), READ_ONCE(st->returned),
			   READ_ONCE(st->bursts), READ_ONCE(st->slow_events),
			   READ_ONCE(st->ring_full_pages), atomic64_read(&l->charged_ns),
			   atomic64_read(&l->capped), l->pool ? l->pool->ring.size : 0,
			   l->nposted, READ_ONCE(st->release_bulks), atomic64_read(&l->model_ns),
			   atomic64_read(&l->pace_behind_ns), READ_ONCE(st->overruns),
			   READ_ONCE(l->wire_open) ?
			   READ_ONCE(l->wire_prod) - READ_ONCE(l->wire_cons) : 0,
			   READ_ONCE(st->mp_allocs), READ_ONCE(st->mp_alloc_ns),
			   READ_ONCE(st->mp_alloc_max_ns));
	}
#if PPSIM_DEVMEM
	netdev_unlock_ops(pd->netdev);
#endif
	rtnl_unlock();
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ppsim_qstate);

static void ppsim_debugfs_init(struct ppsim_dev *pd)
{
	pd->dir = debugfs_create_dir(netdev_name(pd->netdev), ppsim_root);
	debugfs_create_file("running", 0600, pd->dir, pd, &ppsim_running_fops);
	debugfs_create_u32("rate_pps", 0600, pd->dir, &pd->rate_pps);
	debugfs_create_u32("burst_pages", 0600, pd->dir, &pd->burst_pages);
	debugfs_create_u32("hold_us", 0600, pd->dir, &pd->hold_us);
	debugfs_create_u32("slow_cost_us", 0600, pd->dir, &pd->slow_cost_us);
	debugfs_create_u32("release_cost_us", 0600, pd->dir, &pd->release_cost_us);
	debugfs_create_u32("contention_pct", 0600, pd->dir, &pd->contention_pct);
	debugfs_create_u32("stack_ref_pct", 0600, pd->dir, &pd->stack_ref_pct);
	debugfs_create_u32("line_pps", 0600, pd->dir, &pd->line_pps);
	debugfs_create_u32("pace_scale", 0600, pd->dir, &pd->pace_scale);
	debugfs_create_u32("refuse_sets", 0600, pd->dir, &pd->refuse_sets);
	debugfs_create_u32("refused", 0400, pd->dir, &pd->refused);
	debugfs_create_u32("producer_cpu", 0600, pd->dir, &pd->producer_cpu);
	debugfs_create_file("consumer_cpu", 0600, pd->dir, pd, &ppsim_consumer_cpu_fops);
	debugfs_create_file("cost_preset", 0600, pd->dir, pd, &ppsim_preset_fops);
	debugfs_create_file("goodput", 0400, pd->dir, pd, &ppsim_goodput_fops);
	debugfs_create_file("queues", 0400, pd->dir, pd, &ppsim_qstate_fops);
	debugfs_create_file("personality", 0600, pd->dir, pd, &ppsim_personality_fops);
	debugfs_create_file("steer", 0600, pd->dir, pd, &ppsim_steer_fops);
}

/* ---- device lifetime --------------------------------------------------- */

static void ppsim_setup(struct net_device *dev)
{
	ether_setup(dev);
	dev->netdev_ops = &ppsim_netdev_ops;
	dev->ethtool_ops = &ppsim_ethtool_ops;
	dev->stat_ops = &ppsim_stat_ops;
	dev->needs_free_netdev = false;
	dev->priv_flags |= IFF_NO_QUEUE;
}

static void ppsim_stop_consumers(struct ppsim_dev *pd)
{
	unsigned int i;

	WRITE_ONCE(pd->running, 0);
	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		struct ppsim_lane *lane = &pd->lanes[i];

		if (lane->consumer)
			kthread_stop(lane->consumer);
		lane->consumer = NULL;
		kvfree(lane->ho);
		lane->ho = NULL;
	}
}

static int ppsim_new_device(unsigned int nq, bool devmem)
{
	struct device *dma_dev = ppsim_dma_device();
	struct net_device *dev;
	struct ppsim_dev *pd;
	unsigned int i, ccpu;
	int err;

	if (nq < 1 || nq > PPSIM_MAX_QUEUES)
		return -EINVAL;
	/* a memory provider maps its dma-buf for the device's DMA parent */
	if (devmem && !PPSIM_DEVMEM)
		return -EOPNOTSUPP;
	if (devmem && !dma_dev)
		return -ENODEV;
	dev = alloc_netdev_mqs(sizeof(*pd), "ppsim%d", NET_NAME_ENUM, ppsim_setup,
			       PPSIM_MAX_QUEUES, PPSIM_MAX_QUEUES);
	if (!dev)
		return -ENOMEM;
	eth_hw_addr_random(dev);
	pd = netdev_priv(dev);
	pd->netdev = dev;
	pd->pers = &ppsim_personalities[0];
	pd->rx_ring = PPSIM_RING_DEFAULT;
	pd->pool_ring = PPSIM_RING_DEFAULT;
	pd->nq = nq;
	pd->burst_pages = 64;
	pd->hold_us = 0;
	pd->producer_cpu = 0;
	ccpu = num_online_cpus() > 1 ? 1 : 0;
	pd->consumer_cpu = ccpu;
	/* The PCI function the pools map through is the netdev's parent, as
	 * a NIC's is: rtnetlink names it (IFLA_PARENT_DEV_*), and sysfs has
	 * its IOMMU group. */
	if (dma_dev)
		SET_NETDEV_DEV(dev, dma_dev);
#if PPSIM_DEVMEM
	if (devmem) {
		pd->devmem = true;
		dev->queue_mgmt_ops = &ppsim_queue_mgmt_ops;
		dev->ethtool_ops = &ppsim_devmem_ethtool_ops;
		netdev_lockdep_set_classes(dev);
	}
#endif

	for (i = 0; i < PPSIM_MAX_QUEUES; i++) {
		struct ppsim_lane *lane = &pd->lanes[i];

		lane->pd = pd;
		lane->idx = i;
		init_waitqueue_head(&lane->wq);
		spin_lock_init(&lane->wire_lock);
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 13, 0)
		hrtimer_setup(&lane->timer, ppsim_timer_fn, CLOCK_MONOTONIC,
			      HRTIMER_MODE_REL_PINNED);
#else
		hrtimer_init(&lane->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED);
		lane->timer.function = ppsim_timer_fn;
#endif
		lane->ho = kvcalloc(PPSIM_HANDOFF, sizeof(*lane->ho), GFP_KERNEL);
		err = -ENOMEM;
		if (!lane->ho)
			goto err_consumers;
		lane->consumer = kthread_create(ppsim_consumer, lane, "ppsim-c/%u",
						i);
		if (IS_ERR(lane->consumer)) {
			err = PTR_ERR(lane->consumer);
			lane->consumer = NULL;
			goto err_consumers;
		}
		kthread_bind(lane->consumer, ccpu);
		wake_up_process(lane->consumer);
	}

	err = netif_set_real_num_rx_queues(dev, nq);
	if (!err)
		err = netif_set_real_num_tx_queues(dev, nq);
	if (err)
		goto err_consumers;
	err = register_netdev(dev);
	if (err)
		goto err_consumers;

	mutex_lock(&ppsim_devs_lock);
	pd->id = ppsim_next_id++;
	strscpy(pd->name, netdev_name(dev), sizeof(pd->name));
	list_add_tail(&pd->list, &ppsim_devs);
	mutex_unlock(&ppsim_devs_lock);
	ppsim_debugfs_init(pd);
	netdev_info(dev, "ppsim device with %u queues%s\n", nq, devmem ? ", devmem" : "");
	return 0;

err_consumers:
	ppsim_stop_consumers(pd);
	free_netdev(dev);
	return err;
}

/* Caller holds ppsim_devs_lock and has unlinked @pd. */
static void ppsim_destroy(struct ppsim_dev *pd)
{
	struct net_device *dev = pd->netdev;

	debugfs_remove_recursive(pd->dir);
	WRITE_ONCE(pd->running, 0);
	ppsim_wire_cut(pd);
	/* Pools are destroyed in ndo_stop; held pages keep them around with
	 * no ifindex (orphaned) until the consumers give them back below. */
	unregister_netdev(dev);
	ppsim_stop_consumers(pd);
	free_netdev(dev);
}

static ssize_t ppsim_new_write(struct file *f, const char __user *ubuf, size_t len,
			       loff_t *ppos)
{
	char buf[32], mode[16];
	unsigned int nq;
	int n, err;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	/* "N" or "N devmem" */
	n = sscanf(buf, "%u %15s", &nq, mode);
	if (n < 1 || (n == 2 && strcmp(mode, "devmem")))
		return -EINVAL;
	err = ppsim_new_device(nq, n == 2);
	return err ? err : len;
}

static const struct file_operations ppsim_new_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ppsim_new_write,
	.llseek = default_llseek,
};

static ssize_t ppsim_del_write(struct file *f, const char __user *ubuf, size_t len,
			       loff_t *ppos)
{
	struct ppsim_dev *pd, *found = NULL;
	char buf[IFNAMSIZ + 2], *name;
	int err;

	err = ppsim_user_line(buf, sizeof(buf), ubuf, len);
	if (err)
		return err;
	name = strim(buf);

	mutex_lock(&ppsim_devs_lock);
	list_for_each_entry(pd, &ppsim_devs, list) {
		if (!strcmp(netdev_name(pd->netdev), name)) {
			found = pd;
			break;
		}
	}
	if (found) {
		list_del(&found->list);
		ppsim_destroy(found);
	}
	mutex_unlock(&ppsim_devs_lock);
	return found ? len : -ENODEV;
}

static const struct file_operations ppsim_del_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.write = ppsim_del_write,
	.llseek = default_llseek,
};

static unsigned int devices;
module_param(devices, uint, 0444);
MODULE_PARM_DESC(devices, "devices to create at load time (4 queues each)");

static int __init ppsim_init(void)
{
	unsigned int i;
	int err;

	ppsim_root = debugfs_create_dir("ppsim", NULL);
	err = ppsim_dma_init(ppsim_root);
	if (err) {
		debugfs_remove_recursive(ppsim_root);
		return err;
	}
	debugfs_create_file("new_device", 0200, ppsim_root, NULL, &ppsim_new_fops);
	debugfs_create_file("del_device", 0200, ppsim_root, NULL, &ppsim_del_fops);
	ppsim_wire_debugfs_init(ppsim_root);
	for (i = 0; i < devices; i++) {
		err = ppsim_new_device(4, false);
		if (err) {
			pr_err("ppsim: creating device %u failed: %d\n", i, err);
			break;
		}
	}
	return 0;
}

static void __exit ppsim_exit(void)
{
	struct ppsim_dev *pd, *tmp;

	mutex_lock(&ppsim_devs_lock);
	list_for_each_entry_safe(pd, tmp, &ppsim_devs, list) {
		list_del(&pd->list);
		ppsim_destroy(pd);
	}
	mutex_unlock(&ppsim_devs_lock);
	ppsim_dma_exit();
	debugfs_remove_recursive(ppsim_root);
}

module_init(ppsim_init);
module_exit(ppsim_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Simulated page_pool NIC for pptune tests");
