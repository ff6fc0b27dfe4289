//! `pptune fleet suggest`'s drop-in generator over any label values (the
//! evidence any exporter, federation source or remote write can set): the
//! input is split at 0xff into driver, firmware, model flag and source,
//! each lossily UTF-8 (so every control character, U+2028/9, the BOM are
//! reachable). The drop-in must read back as exactly its priors (nothing
//! but comments can carry a label), the labels as they were.
#![no_main]
use config::fleet::{Class, Converged, drop_in, read_back};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut parts = data.split(|b| *b == 0xff).map(String::from_utf8_lossy);
    let driver = parts.next().unwrap_or_default().into_owned();
    let firmware = parts.next().map(std::borrow::Cow::into_owned);
    let model = parts
        .next()
        .is_some_and(|m| m.len() % 2 == 1)
        .then(|| "8086:159b".to_owned());
    let source = parts.next().unwrap_or_default().into_owned();
    // A blank driver is not a class (parse_answer drops it).
    if driver.trim().is_empty() {
        return;
    }
    let class = Class {
        driver,
        model,
        firmware: firmware.filter(|f| !f.is_empty()),
        mtu: data.first().map(|b| 68 + u32::from(*b) * 100),
        speed: None,
    };
    let rows: Vec<Converged> = ["a", "b"]
        .into_iter()
        .map(|h| Converged {
            instance: h.into(),
            class: class.clone(),
            ring: 2048,
        })
        .collect();
    // Whatever the strings hold, such a class is usable.
    assert!(config::fleet::usable(&rows[0]), "{class:?}");
    let text = drop_in(&rows, 2, &source);
    if let Err(e) = read_back(&text, &rows, 2) {
        panic!("{e}\n{text}");
    }
    let p = config::parse_str("fleet.yaml", &text).unwrap();
    assert_eq!(p.priors[0].driver, class.driver);
    assert_eq!(p.priors[0].firmware, class.firmware);
});
