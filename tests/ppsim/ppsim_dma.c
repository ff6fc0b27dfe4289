// SPDX-License-Identifier: GPL-2.0
/*
 * ppsim's DMA side: the pools map their pages through a real PCI function
 * when the VM has one, and a calibration of what a page costs on each path.
 *
 * The iommu testbed profiles (docs/testbed.md) give the VM QEMU's `edu`
 * test device behind its emulated Intel IOMMU. ppsim binds to it and
 * creates every RX pool with PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV on it,
 * as a NIC driver does on its PCI function: each page the slow path takes
 * from the page allocator is mapped by the kernel's IOMMU code (an IOVA,
 * page-table writes), each page freed past a full recycle ring is unmapped
 * (and, in strict mode, the IOTLB invalidated), and recycled pages keep
 * their mapping. Nothing is modelled: the device never moves data (the
 * wire's "DMA" is a CPU copy), only the mapping work is real. Without the
 * device the pools map nothing, as before.
 *
 * `calibrate` (debugfs, read) measures, on a pool made exactly as an RX
 * queue's, the time per page of each path; under the testbed's --icount
 * clock a guest nanosecond is one guest instruction.
 */
#include <linux/dma-mapping.h>
#include <linux/pci.h>
#include <linux/sort.h>
#include "ppsim.h"

/* QEMU's educational PCI device (hw/misc/edu.c). */
#define PPSIM_EDU_VENDOR	0x1234
#define PPSIM_EDU_DEVICE	0x11e8

/* Set once at probe, cleared at module exit after every device is gone. */
static struct device *ppsim_dma_dev;

void ppsim_dma_pool_params(struct page_pool_params *pp)
{
	struct device *dev = READ_ONCE(ppsim_dma_dev);

	if (!dev)
		return;
	pp->dev = dev;
	pp->flags |= PP_FLAG_DMA_MAP | PP_FLAG_DMA_SYNC_DEV;
	pp->dma_dir = DMA_FROM_DEVICE;
	pp->offset = 0;
	pp->max_len = PAGE_SIZE;
}

struct device *ppsim_dma_device(void)
{
	return READ_ONCE(ppsim_dma_dev);
}

static int ppsim_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	int err;

	if (READ_ONCE(ppsim_dma_dev))
		return -EBUSY;
	err = pcim_enable_device(pdev);
	if (err)
		return err;
	err = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (err)
		return err;
	pci_set_master(pdev);
	WRITE_ONCE(ppsim_dma_dev, &pdev->dev);
	dev_info(&pdev->dev, "ppsim: RX pools map their pages through this device\n");
	return 0;
}

static void ppsim_pci_remove(struct pci_dev *pdev)
{
	/* Only at module exit (no sysfs unbind): every ppsim device and its
	 * pools are gone by then. */
	WRITE_ONCE(ppsim_dma_dev, NULL);
}

static const struct pci_device_id ppsim_pci_ids[] = {
	{ PCI_DEVICE(PPSIM_EDU_VENDOR, PPSIM_EDU_DEVICE) },
	{ }
};

static struct pci_driver ppsim_pci_driver = {
	.name = "ppsim",
	.id_table = ppsim_pci_ids,
	.probe = ppsim_pci_probe,
	.remove = ppsim_pci_remove,
	/* A pool's pages are unmapped against this device until the last one
	 * comes back, which may be after its netdev is gone. */
	.driver.suppress_bind_attrs = true,
};

/* ---- calibrate ----------------------------------------------------------- */

#define PPSIM_CAL_PAGES	1024
#define PPSIM_CAL_REPS	7
#define PPSIM_CAL_FILL	0xa5

/* The figures of a round, time per page. */
enum {
	PPSIM_CAL_SLOW,		/* taken by the slow path (bulk refill, map) */
	PPSIM_CAL_PUT_RING,	/* put into a ring with room */
	PPSIM_CAL_GET_RING,	/* taken back from the ring */
	PPSIM_CAL_RELEASE,	/* put into a full ring: unmapped, freed */
	PPSIM_CAL_FIGS,
};

static const char *const ppsim_cal_names[PPSIM_CAL_FIGS] = {
	"slow_ns", "put_ring_ns", "get_ring_ns", "release_ns",
};

struct ppsim_cal_rep {
	u64 ns[PPSIM_CAL_FIGS];
	u32 dirty;		/* slow-path pages still holding the last round's fill */
	u32 mapped;		/* slow-path pages with a DMA address other than their physical one */
};

static int ppsim_cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static u64 ppsim_median(u64 *v, unsigned int n)
{
	sort(v, n, sizeof(*v), ppsim_cmp_u64, NULL);
	return v[n / 2];
}

static bool ppsim_page_dirty(struct page *page)
{
	const u8 *p = page_address(page);

	return p[0] == PPSIM_CAL_FILL && p[PAGE_SIZE - 1] == PPSIM_CAL_FILL;
}

/* One round on a fresh pool whose ring holds PPSIM_CAL_PAGES: take 2N
 * pages (all from the slow path: the pool starts empty), put N back (the
 * ring fills), put the other N (the ring is full: each is released), take
 * N again (from the ring). The released pages are filled first, so the
 * next round's slow path shows whether the allocator cleared them. */
static int ppsim_cal_round(struct page **pages, struct ppsim_cal_rep *r)
{
	const unsigned int n = PPSIM_CAL_PAGES;
	struct page_pool_params pp = {
		.order = 0,
		.pool_size = n,
		.nid = NUMA_NO_NODE,
		.dma_dir = DMA_FROM_DEVICE,
	};
	struct page_pool *pool;
	unsigned int i, got = 0;
	u64 t0, t1;
	int err = 0;

	ppsim_dma_pool_params(&pp);
	pool = page_pool_create(&pp);
	if (IS_ERR(pool))
		return PTR_ERR(pool);

	t0 = ktime_get_ns();
	for (got = 0; got < 2 * n; got++) {
		pages[got] = page_pool_alloc_pages(pool, GFP_KERNEL | __GFP_NOWARN);
		if (!pages[got])
			break;
	}
	t1 = ktime_get_ns();
	if (got < 2 * n) {
		err = -ENOMEM;
		goto out;
	}
	r->ns[PPSIM_CAL_SLOW] = div_u64(t1 - t0, 2 * n);
	r->dirty = 0;
	r->mapped = 0;
	for (i = 0; i < 2 * n; i++) {
		if (ppsim_page_dirty(pages[i]))
			r->dirty++;
		if ((pp.flags & PP_FLAG_DMA_MAP) &&
		    page_pool_get_dma_addr(pages[i]) != page_to_phys(pages[i]))
			r->mapped++;
	}
	for (i = n; i < 2 * n; i++)
		memset(page_address(pages[i]), PPSIM_CAL_FILL, PAGE_SIZE);

	t0 = ktime_get_ns();
	for (i = 0; i < n; i++)
		page_pool_put_full_page(pool, pages[i], false);
	t1 = ktime_get_ns();
	r->ns[PPSIM_CAL_PUT_RING] = div_u64(t1 - t0, n);

	t0 = ktime_get_ns();
	for (i = n; i < 2 * n; i++)
		page_pool_put_full_page(pool, pages[i], false);
	t1 = ktime_get_ns();
	r->ns[PPSIM_CAL_RELEASE] = div_u64(t1 - t0, n);
	got = 0;

	t0 = ktime_get_ns();
	for (got = 0; got < n; got++) {
		pages[got] = page_pool_alloc_pages(pool, GFP_KERNEL | __GFP_NOWARN);
		if (!pages[got])
			break;
	}
	t1 = ktime_get_ns();
	if (got < n)
		err = -ENOMEM;
	else
		r->ns[PPSIM_CAL_GET_RING] = div_u64(t1 - t0, n);
out:
	for (i = 0; i < got; i++)
		page_pool_put_full_page(pool, pages[i], false);
	page_pool_destroy(pool);
	return err;
}

static int ppsim_calibrate_show(struct seq_file *m, void *v)
{
	struct ppsim_cal_rep rep[PPSIM_CAL_REPS];
	u64 col[PPSIM_CAL_REPS];
	struct page **pages;
	unsigned int i, k;
	u32 dirty = 0, mapped = 0;
	int err = 0;

	pages = kvcalloc(2 * PPSIM_CAL_PAGES, sizeof(*pages), GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	for (i = 0; i < PPSIM_CAL_REPS && !err; i++)
		err = ppsim_cal_round(pages, &rep[i]);
	kvfree(pages);
	if (err)
		return err;
	/* The first round's slow path had no fill to find: it is left out of
	 * the zeroing check, not out of the figures. */
	for (i = 1; i < PPSIM_CAL_REPS; i++)
		dirty += rep[i].dirty;
	for (i = 0; i < PPSIM_CAL_REPS; i++)
		mapped += rep[i].mapped;
	seq_printf(m, "pages=%u rounds=%u", PPSIM_CAL_PAGES, PPSIM_CAL_REPS);
	for (k = 0; k < PPSIM_CAL_FIGS; k++) {
		const char *name = ppsim_cal_names[k];
		u64 med;

		for (i = 0; i < PPSIM_CAL_REPS; i++)
			col[i] = rep[i].ns[k];
		med = ppsim_median(col, PPSIM_CAL_REPS);	/* sorts col */
		seq_printf(m, " %s=%llu %s_min=%llu %s_max=%llu", name, med, name,
			   col[0], name, col[PPSIM_CAL_REPS - 1]);
	}
	seq_printf(m, " dirty_refills=%u checked_refills=%u mapped=%u slow_pages=%u\n",
		   dirty, (PPSIM_CAL_REPS - 1) * 2 * PPSIM_CAL_PAGES, mapped,
		   PPSIM_CAL_REPS * 2 * PPSIM_CAL_PAGES);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ppsim_calibrate);

static int ppsim_dma_show(struct seq_file *m, void *v)
{
	struct device *dev = READ_ONCE(ppsim_dma_dev);

	seq_printf(m, "%s\n", dev ? dev_name(dev) : "none");
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ppsim_dma);

int ppsim_dma_init(struct dentry *root)
{
	int err = pci_register_driver(&ppsim_pci_driver);

	if (err)
		return err;
	debugfs_create_file("dma_device", 0400, root, NULL, &ppsim_dma_fops);
	debugfs_create_file("calibrate", 0400, root, NULL, &ppsim_calibrate_fops);
	return 0;
}

void ppsim_dma_exit(void)
{
	pci_unregister_driver(&ppsim_pci_driver);
}
