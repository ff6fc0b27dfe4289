//! The registry's labelled families: prometheus-client's `Family` with
//! one change, that a table cut down by `remove` gives its memory back
//! (`policy::reuse`'s rule). prometheus-client's keeps the capacity of
//! the most series it ever held, so a burst of a thousand veths that
//! came and went pinned about 1.3 MB of tables (ring, channel, mode,
//! info, unjudged and rx families: every link has them) for the
//! daemon's life. The exposition is prometheus-client's own: each
//! series is written through its `MetricEncoder` in the map's order,
//! as `Family` does (`tests` checks it against `Family` byte for
//! byte).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, RwLock};

use policy::reuse::Reused as _;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

/// A labelled family whose table shrinks when series go. Handles
/// (`Counter`, `Gauge`) are shared: `get_or_create` hands out a clone.
#[derive(Debug)]
pub struct Family<S, M> {
    metrics: Arc<RwLock<HashMap<S, M>>>,
}

impl<S, M> Default for Family<S, M> {
    fn default() -> Self {
        Self {
            metrics: Arc::new(RwLock::new(HashMap::new())),
        }
    }
}

impl<S, M> Clone for Family<S, M> {
    fn clone(&self) -> Self {
        Self {
            metrics: Arc::clone(&self.metrics),
        }
    }
}

impl<S: Clone + Hash + Eq, M: Clone + Default> Family<S, M> {
    /// The series of `labels` (made at its default, 0, when new).
    pub fn get_or_create(&self, labels: &S) -> M {
        if let Ok(map) = self.metrics.read()
            && let Some(m) = map.get(labels)
        {
            return m.clone();
        }
        match self.metrics.write() {
            Ok(mut map) => map.entry(labels.clone()).or_default().clone(),
            // A poisoned table: a handle nobody exports rather than a panic.
            Err(_) => M::default(),
        }
    }

    /// Drops the series of `labels`; the table is cut to what it holds
    /// once it holds under half its capacity (`policy::reuse`).
    pub fn remove(&self, labels: &S) -> bool {
        let Ok(mut map) = self.metrics.write() else {
            return false;
        };
        let had = map.remove(labels).is_some();
        map.let_go();
        had
    }

    /// Drops every series (and the table).
    pub fn clear(&self) {
        if let Ok(mut map) = self.metrics.write() {
            *map = HashMap::new();
        }
    }

    /// Series held, and the table's capacity.
    #[cfg(test)]
    pub fn footprint(&self) -> (usize, usize) {
        self.metrics
            .read()
            .map_or((0, 0), |m| (m.len(), m.capacity()))
    }
}

impl<S, M: TypedMetric> TypedMetric for Family<S, M> {
    const TYPE: MetricType = <M as TypedMetric>::TYPE;
}

impl<S, M> EncodeMetric for Family<S, M>
where
    S: Clone + Hash + Eq + EncodeLabelSet,
    M: EncodeMetric + TypedMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let Ok(map) = self.metrics.read() else {
            return Ok(());
        };
        for (labels, m) in map.iter() {
            let encoder = encoder.encode_family(labels)?;
            m.encode(encoder)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.metrics.read().map_or(true, |m| m.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use prometheus_client::registry::{Registry, Unit};

    use super::super::labels::{DevLabels, InfoLabels, RingLabels};
    use super::*;

    type Reference<S, M> = prometheus_client::metrics::family::Family<S, M>;

    fn ring(device: &str, ring: &str) -> RingLabels {
        RingLabels {
            device: device.to_owned(),
            ring: ring.to_owned(),
        }
    }

    /// The exposition's lines, sorted: both families write in their
    /// hash map's order, which differs per map (and per process).
    fn lines(r: &Registry) -> Vec<String> {
        let mut s = String::new();
        prometheus_client::encoding::text::encode(&mut s, r).unwrap();
        let mut v: Vec<String> = s.lines().map(str::to_owned).collect();
        v.sort();
        v
    }

    /// Gauges and counters, with and without a unit, labels that need
    /// escaping, series removed and an emptied family (left out, as
    /// prometheus-client leaves it out): the same text as
    /// prometheus-client's `Family` given the same calls.
    #[test]
    fn writes_what_prometheus_clients_family_writes() {
        let (mut ours, mut theirs) = (Registry::default(), Registry::default());
        let (a, b) = (
            Family::<RingLabels, Gauge>::default(),
            Reference::<RingLabels, Gauge>::default(),
        );
        ours.register_with_unit(
            "pptune_ring",
            "Ring",
            Unit::Other("entries".into()),
            a.clone(),
        );
        theirs.register_with_unit(
            "pptune_ring",
            "Ring",
            Unit::Other("entries".into()),
            b.clone(),
        );
        let (c, d) = (
            Family::<DevLabels, Counter>::default(),
            Reference::<DevLabels, Counter>::default(),
        );
        ours.register("pptune_device_rx", "Rx", c.clone());
        theirs.register("pptune_device_rx", "Rx", d.clone());
        let (e, f) = (
            Family::<InfoLabels, Gauge>::default(),
            Reference::<InfoLabels, Gauge>::default(),
        );
        ours.register("pptune_device_info", "Info", e.clone());
        theirs.register("pptune_device_info", "Info", f.clone());
        for (i, name) in ["eth0", "we\"ird\\na\nme", "veth1"].into_iter().enumerate() {
            let v = i64::try_from(i).unwrap();
            for r in ["rx", "tx"] {
                a.get_or_create(&ring(name, r)).set(v * 256);
                b.get_or_create(&ring(name, r)).set(v * 256);
            }
            let l = DevLabels {
                device: name.to_owned(),
            };
            c.get_or_create(&l).inc_by(u64::try_from(v).unwrap());
            d.get_or_create(&l).inc_by(u64::try_from(v).unwrap());
            let info = InfoLabels {
                device: name.to_owned(),
                driver: "veth".to_owned(),
                kind: String::new(),
                mtu: "1500".to_owned(),
                speed: String::new(),
                model: String::new(),
                firmware: "1.0\"x".to_owned(),
            };
            e.get_or_create(&info).set(1);
            f.get_or_create(&info).set(1);
            if i == 1 {
                assert_eq!(e.remove(&info), f.remove(&info));
            }
        }
        assert_eq!(a.remove(&ring("eth0", "tx")), b.remove(&ring("eth0", "tx")));
        assert!(!a.remove(&ring("eth9", "tx")) && !b.remove(&ring("eth9", "tx")));
        assert_eq!(lines(&ours), lines(&theirs));
        // One series per family: the whole text, in order.
        let (mut one, mut other) = (Registry::default(), Registry::default());
        let (g, h) = (
            Family::<DevLabels, Gauge>::default(),
            Reference::<DevLabels, Gauge>::default(),
        );
        one.register_with_unit("pptune_x", "X", Unit::Bytes, g.clone());
        other.register_with_unit("pptune_x", "X", Unit::Bytes, h.clone());
        let l = DevLabels {
            device: "eth0".to_owned(),
        };
        g.get_or_create(&l).set(7);
        h.get_or_create(&l).set(7);
        let text = |r: &Registry| {
            let mut s = String::new();
            prometheus_client::encoding::text::encode(&mut s, r).unwrap();
            s
        };
        assert_eq!(text(&one), text(&other));
        g.remove(&l);
        h.remove(&l);
        assert_eq!(text(&one), text(&other));
        assert!(!text(&one).contains("pptune_x"), "{}", text(&one));
    }

    /// A burst's series, gone: the table is cut back to what is left
    /// (prometheus-client's keeps room for the burst). Fails with the
    /// capacity left alone.
    #[test]
    fn a_table_a_burst_grew_is_cut_back() {
        let f = Family::<RingLabels, Gauge>::default();
        for i in 0..4000 {
            f.get_or_create(&ring(&format!("veth{i}"), "rx")).set(1);
        }
        for i in 10..4000 {
            f.remove(&ring(&format!("veth{i}"), "rx"));
        }
        let (len, capacity) = f.footprint();
        assert_eq!(len, 10);
        assert!(capacity < 100, "{capacity}");
        // The handles kept are the series exported.
        let g = f.get_or_create(&ring("veth1", "rx"));
        g.set(5);
        assert_eq!(f.get_or_create(&ring("veth1", "rx")).get(), 5);
    }
}
