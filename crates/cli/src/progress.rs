//! Progress on stderr with indicatif, only when stderr is a terminal.
use commbench_core::record::Recorder;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::Duration;

static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// A recorder whose progress messages drive a spinner (or go nowhere when
/// stderr is not a terminal).
pub fn recorder() -> Recorder {
    let mut rec = Recorder::new();
    if std::io::stderr().is_terminal() {
        let pb = ProgressBar::new_spinner();
        pb.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed}] {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        pb.enable_steady_tick(Duration::from_millis(120));
        let sink = pb.clone();
        rec.set_progress_sink(Box::new(move |m: &str| sink.set_message(m.to_owned())));
        if let Ok(mut g) = BAR.lock() {
            *g = Some(pb);
        }
    }
    rec
}

/// Clears the spinner.
pub fn finish() {
    if let Ok(mut g) = BAR.lock() {
        if let Some(pb) = g.take() {
            pb.finish_and_clear();
        }
    }
}
