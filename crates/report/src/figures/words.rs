//! Numbers and names as a caption says them: values with a unit that
//! suits them, ratios, parameters and categories in words, and the
//! sentences every kind of figure shares (the values of a series, the
//! intervals drawn, the series left to the table).
//!
//! Invariant: captions and the numbers tables print a value through
//! [`value`] only, so the two always agree.

/// Time units a value may be moved between for reading.
const TIME_UNITS: [(&str, f64); 4] = [("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)];

/// Three significant digits (2.00, 8.90, 148, 0.283).
fn sig3(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (2 - mag).clamp(0, 6) as usize;
    format!("{x:.decimals$}")
}

/// A value with its unit as a reader reads it: times in the unit that
/// suits them (85.0 µs, not 85000 ns), other quantities with k/M/G
/// (2.00M msg/s). Captions and the numbers tables use this one format.
pub fn value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    if let Some(&(_, scale)) = TIME_UNITS.iter().find(|(u, _)| *u == unit) {
        let ns = v * scale;
        let (u, s) = TIME_UNITS
            .iter()
            .rev()
            .find(|(_, s)| ns.abs() >= *s)
            .copied()
            .unwrap_or(TIME_UNITS[0]);
        return format!("{} {u}", sig3(ns / s));
    }
    let a = v.abs();
    let (x, suffix) = if a >= 1e12 {
        return format!("{v:.3e} {unit}").trim_end().to_owned();
    } else if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    if unit == "×" {
        return format!("{}{suffix}×", sig3(x));
    }
    format!("{}{suffix} {unit}", sig3(x)).trim_end().to_owned()
}

/// A ratio as a caption prints it: 4.0×, 66×.
pub(super) fn ratio(r: f64) -> String {
    if r >= 10.0 {
        format!("{r:.0}×")
    } else {
        format!("{r:.1}×")
    }
}

/// A parameter value in words: text as it is, a number after the
/// parameter's name (`threads 2`).
pub(super) fn in_words(key: &str, v: &str) -> String {
    if v.parse::<f64>().is_ok() || v == "true" || v == "false" || v == "null" {
        format!("{} {v}", key.replace('_', " "))
    } else {
        v.to_owned()
    }
}

/// A category or x value in words: a number after the axis name, with
/// the axis unit after it (`threads 2`, `requested delay 100 ns`); text as
/// it is (`shm`).
pub(super) fn x_words(x_label: &str, v: &str) -> String {
    if v.parse::<f64>().is_err() && !v.ends_with(['k', 'M', 'G']) {
        return v.to_owned();
    }
    match x_label.rsplit_once(" (") {
        Some((name, unit)) => format!("{name} {v} {}", unit.trim_end_matches(')')),
        None => format!("{x_label} {v}"),
    }
}

/// 0.999 as `p99.9`.
pub(super) fn quantile_name(q: f64) -> String {
    let t = format!("{:.2}", q * 100.0);
    format!("p{}", t.trim_end_matches('0').trim_end_matches('.'))
}

/// One category's value in a caption: the category in words, the value
/// drawn and the value as printed.
pub(super) struct Entry {
    pub(super) name: String,
    pub(super) value: f64,
    pub(super) text: String,
}

/// The caption's sentence for one series of bars or a stacked figure's
/// totals: each category's value, then the highest over the lowest when
/// the categories are alternatives (`shm / uds`), never when they are
/// levels of a quantity ("requested delay 10000 ns / requested delay 100
/// ns = 91×" read as a ratio of the two requests).
pub(super) fn values_sentence(entries: &[Entry], alternatives: bool) -> String {
    let mut parts: Vec<String> = entries
        .iter()
        .take(SHOWN_VALUES)
        .map(|e| format!("{}: {}", e.name, e.text))
        .collect();
    if entries.len() > SHOWN_VALUES {
        parts.push(format!("{} more below", entries.len() - SHOWN_VALUES));
    }
    let mut s = parts.join(", ");
    if let Some(r) = extremes_ratio(entries).filter(|_| alternatives) {
        s.push_str(&format!("; {r}"));
    }
    s
}

/// How many categories' values a caption names before leaving the rest
/// to the numbers table.
pub(super) const SHOWN_VALUES: usize = 8;

/// The highest positive value over the lowest (`shm / uds = 2.0×`), when
/// there are two that differ.
pub(super) fn extremes_ratio(entries: &[Entry]) -> Option<String> {
    let pos: Vec<&Entry> = entries.iter().filter(|e| e.value > 0.0).collect();
    if pos.len() < 2 {
        return None;
    }
    let hi = pos
        .iter()
        .max_by(|a, b| a.value.total_cmp(&b.value))
        .expect("two");
    let lo = pos
        .iter()
        .min_by(|a, b| a.value.total_cmp(&b.value))
        .expect("two");
    (hi.value > lo.value)
        .then(|| format!("{} / {} = {}", hi.name, lo.name, ratio(hi.value / lo.value)))
}

/// The sentence about intervals: drawn (from how many repeats), or why
/// not. `repeats` are the repeats behind each interval drawn.
pub(super) fn interval_sentence(
    drawn: usize,
    total: usize,
    repeats: &[usize],
    what: &str,
) -> String {
    let lo = repeats.iter().copied().min().unwrap_or(1);
    let hi = repeats.iter().copied().max().unwrap_or(1);
    let runs = if lo == hi {
        format!("{lo} runs")
    } else {
        format!("{lo}–{hi} runs")
    };
    if drawn == 0 {
        format!(
            "No {}: these records carry no repeats (one run each), so no interval.",
            what.to_lowercase()
        )
    } else if drawn < total {
        format!("{what}: the 95% interval of the median over {runs}, where the records carry repeats; the others are one run each.")
    } else {
        format!("{what}: the 95% interval of the median over {runs}.")
    }
}

/// How many series a caption describes before leaving the rest to the
/// numbers table.
pub(super) const SHOWN_SERIES: usize = 4;

/// The sentence for the series past [`SHOWN_SERIES`], if any. It counts
/// none: every number a caption quotes is one the figure draws, and the
/// legend names them all.
pub(super) fn more_series(count: usize) -> Option<String> {
    (count > SHOWN_SERIES).then(|| "The other series' values are in the numbers below.".to_owned())
}
