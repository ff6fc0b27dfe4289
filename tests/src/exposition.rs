//! Reading a Prometheus text exposition (the 0.0.4 text format or
//! OpenMetrics): its samples, the sum of some of them, and a series as
//! Prometheus stores it once scraped.

use std::collections::BTreeMap;

/// Whether `series` (a sample's name and labels, as written) is of
/// `family`: the whole name, so `pptune_pools` is not
/// `pptune_pools_orphaned`.
#[must_use]
pub fn is_of_family(series: &str, family: &str) -> bool {
    series
        .strip_prefix(family)
        .is_some_and(|r| r.is_empty() || r.starts_with('{'))
}

/// The samples of an exposition: each series (name and labels, as
/// written) to its value.
///
/// # Panics
/// On a sample line without a value or with one that is not a number: a
/// malformed exposition fails the test that reads it.
#[must_use]
#[allow(clippy::panic)]
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("a sample without a value: {l:?}"));
            let value = value
                .parse()
                .unwrap_or_else(|e| panic!("a sample whose value is not a number ({e}): {l:?}"));
            (series.to_owned(), value)
        })
        .collect()
}

/// Sum of the samples of `family` (the whole name, [`is_of_family`])
/// whose label set contains every `labels` entry (`key="value"`); 0 when
/// none matches; a line whose value is not a number is passed over.
#[must_use]
pub fn sample_sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            is_of_family(series, family) && labels.iter().all(|want| series.contains(want))
        })
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}

/// Sum of the samples whose line starts with `prefix` (a name, or a name
/// and the start of its labels: `pptune_resyncs_total{kind="netdev"}`);
/// 0 when none does.
#[must_use]
pub fn prefix_sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `series` as Prometheus stores it from a scrape of target `instance` of
/// job `pptune`: with `job` and `instance` added after its own labels (the
/// form promtool's input series and the checked-in alert tests use).
#[must_use]
pub fn with_target(series: &str, instance: &str) -> String {
    let target = format!("job=\"pptune\",instance=\"{instance}\"");
    match series.strip_suffix('}') {
        Some(head) => format!("{head},{target}}}"),
        None => format!("{series}{{{target}}}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sample_sum_matches_whole_family_names_and_every_label() {
        let text = "# HELP pptune_pools x\n\
                    pptune_pools{device=\"a\"} 2\n\
                    pptune_pools{device=\"b\"} 3\n\
                    pptune_pools_orphaned 7\n\
                    pptune_resyncs_total 4\n";
        assert!((super::sample_sum(text, "pptune_pools", &[]) - 5.0).abs() < 1e-9);
        assert!((super::sample_sum(text, "pptune_pools", &["device=\"b\""]) - 3.0).abs() < 1e-9);
        assert!((super::sample_sum(text, "pptune_resyncs_total", &[]) - 4.0).abs() < 1e-9);
        assert!(super::sample_sum(text, "pptune_pool", &[]).abs() < 1e-9);
        assert!(super::sample_sum(text, "pptune_pools", &["device=\"c\""]).abs() < 1e-9);
    }

    #[test]
    fn samples_map_each_series_to_its_value_and_a_bad_value_fails() {
        let text = "# TYPE a counter\na_total{x=\"1 2\"} 3\nb 4.5\nc NaN\n\n";
        let s = super::samples(text);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s["a_total{x=\"1 2\"}"], 3.0);
        assert_eq!(s["b"], 4.5);
        assert!(s["c"].is_nan());
        assert!(std::panic::catch_unwind(|| super::samples("a x\n")).is_err());
        assert!(std::panic::catch_unwind(|| super::samples("a\n")).is_err());
    }

    #[test]
    fn with_target_adds_job_and_instance_after_the_series_labels() {
        assert_eq!(
            super::with_target("a{x=\"1\"}", "h:1"),
            "a{x=\"1\",job=\"pptune\",instance=\"h:1\"}"
        );
        assert_eq!(
            super::with_target("up", "h:1"),
            "up{job=\"pptune\",instance=\"h:1\"}"
        );
    }
}
