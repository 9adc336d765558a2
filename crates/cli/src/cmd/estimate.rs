//! `commbench estimate`: `core::estimate` for numbers given on the command
//! line — a median with its 95% interval, and a ratio after/before from
//! unpaired or paired repeats — so that scripts comparing commbench with
//! its peers (bench/) print the statistics every other command prints,
//! computed once, here, rather than by a copy of their own.
use anyhow::Result;
use clap::{Args, Subcommand};
use commbench_core::estimate::{paired::ratio_paired, ratio_hodges_lehmann, Estimate};

#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  commbench estimate median 10.2 10.4 9.9 10.1 10.3 10.0
  commbench estimate ratio --before '10.2 10.4 9.9 10.1' --after '11.0 11.2 10.9 11.3'
  commbench estimate paired --before '10.2 10.4 9.9 10.1 10.3 10.0' --after '10.9 11.1 10.6 10.8 11.0 10.7' --json")]
pub struct EstimateArgs {
    #[command(subcommand)]
    pub what: What,
    /// Print one JSON object: estimate, lo, hi (null where no interval exists), n.
    #[arg(long, global = true)]
    pub json: bool,
    /// Decimal places of a median in text.
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=12))]
    pub digits: u8,
}

#[derive(Debug, Subcommand)]
pub enum What {
    /// The median of the samples with its distribution-free 95% interval (order statistics; none below 6 samples).
    Median {
        /// The samples (numbers separated by spaces or commas; non-finite ones are dropped).
        #[arg(required = true, allow_hyphen_values = true)]
        samples: Vec<String>,
    },
    /// AFTER / BEFORE from unpaired, interleaved repeats: the Hodges–Lehmann ratio with Moses' 95% interval.
    Ratio(Sides),
    /// AFTER / BEFORE from repeats run side by side in pairs (the i-th of each): the Hodges–Lehmann estimate of the per-pair log ratios with the signed-rank 95% interval (none below 6 pairs).
    Paired(Sides),
}

#[derive(Debug, Args)]
pub struct Sides {
    /// The before samples (one argument, numbers separated by spaces or commas).
    #[arg(long, allow_hyphen_values = true)]
    pub before: String,
    /// The after samples.
    #[arg(long, allow_hyphen_values = true)]
    pub after: String,
}

fn numbers(words: &[&str]) -> Result<Vec<f64>> {
    words
        .iter()
        .flat_map(|w| w.split(|c: char| c.is_whitespace() || c == ','))
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.parse::<f64>()
                .map_err(|_| crate::usage(format!("{w:?} is not a number")))
        })
        .collect()
}

fn bound(x: f64) -> serde_json::Value {
    if x.is_finite() {
        serde_json::json!(x)
    } else {
        serde_json::Value::Null
    }
}

pub fn run(a: &EstimateArgs) -> Result<()> {
    let (est, lo, hi, n, ratio) = match &a.what {
        What::Median { samples } => {
            let v = numbers(&samples.iter().map(String::as_str).collect::<Vec<_>>())?;
            let e = Estimate::from_samples(&v);
            (e.median, e.lo, e.hi, e.n, false)
        }
        What::Ratio(s) | What::Paired(s) => {
            let b = numbers(&[&s.before])?;
            let f = numbers(&[&s.after])?;
            let r = if matches!(a.what, What::Paired(_)) {
                if b.len() != f.len() {
                    return Err(crate::usage(format!(
                        "paired: {} before and {} after samples; pairs need as many of each",
                        b.len(),
                        f.len()
                    )));
                }
                ratio_paired(&b, &f)
            } else {
                ratio_hodges_lehmann(&b, &f)
            };
            (r.ratio, r.lo, r.hi, b.len().min(f.len()), true)
        }
    };
    // An interval that is not one (a single sample, the bootstrap's
    // fallback collapsing to the point) is printed as none.
    let has = lo.is_finite() && hi.is_finite() && (n >= 2);
    let d = a.digits as usize;
    // A ratio as every surface prints one (one precision for the ratio
    // and its interval: `commbench_core::estimate::ratio_text`).
    let text = match (ratio, has) {
        (true, true) => commbench_core::estimate::ratio_text(est, lo, hi),
        (true, false) => format!(
            "{} [interval needs more repeats]",
            commbench_core::estimate::ratio_text(est, f64::NAN, f64::NAN)
        ),
        (false, true) => format!("{est:.d$} [{lo:.d$}, {hi:.d$}]"),
        (false, false) => format!("{est:.d$} [n<6: no interval]"),
    };
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "estimate": bound(est),
                "lo": if has { bound(lo) } else { serde_json::Value::Null },
                "hi": if has { bound(hi) } else { serde_json::Value::Null },
                "n": n,
                "text": text,
            })
        );
        return Ok(());
    }
    println!("{text}");
    Ok(())
}
