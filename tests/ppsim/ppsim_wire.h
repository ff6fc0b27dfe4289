/* SPDX-License-Identifier: GPL-2.0 */
/*
 * ppsim wire mode (ppsim_wire.c): two ppsim devices joined like two NICs
 * on one cable. What ppsim_main.c calls; see README.md "Wire mode".
 */
#ifndef PPSIM_WIRE_H
#define PPSIM_WIRE_H

#include "ppsim.h"

/* NAPI poll of a wired queue: frames the peer wrote into this queue's
 * posted buffers go up the stack (napi_build_skb + GRO), refill first. */
int ppsim_wire_poll(struct napi_struct *napi, int budget);
/* ndo_start_xmit of a wired device: copy the frame into the peer's ring. */
netdev_tx_t ppsim_wire_xmit(struct sk_buff *skb, struct net_device *dev);
int ppsim_wire_get_iflink(const struct net_device *dev);

/* Queue lifetime, called by ppsim_lane_open and the queue ops for wired
 * devices (the descriptor ring and its lengths are the queue's memory,
 * struct ppsim_qmem): start after napi_enable; quiesce one queue (stop
 * every xmit into it and wait for those running) before it stops, or all
 * of @pd's before the queues close. */
void ppsim_wire_lane_start(struct ppsim_lane *lane);
void ppsim_wire_lane_quiesce(struct ppsim_lane *lane);
void ppsim_wire_quiesce(struct ppsim_dev *pd);

/* Carrier: on at both ends when both are up (RTNL). */
void ppsim_wire_carrier(struct ppsim_dev *pd, bool up);
/* @pd is being deleted: cut the wire first (takes RTNL, then waits out
 * the xmits in flight). The peer stays wired, with no other end. */
void ppsim_wire_cut(struct ppsim_dev *pd);
/* link_wire and unlink_wire under the ppsim debugfs root. */
void ppsim_wire_debugfs_init(struct dentry *root);

#endif /* PPSIM_WIRE_H */
