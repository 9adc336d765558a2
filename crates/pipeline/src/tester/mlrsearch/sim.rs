//! A simulated device and tester for the controller's tests: a forwarder
//! of a set capacity with a receive ring, paused now and then by its host,
//! behind a generator that can fall behind its schedule.
//!
//! Model: trials run on one clock that advances only while a trial
//! offers frames. A steady load above the capacity loses what the ring
//! cannot hold; a pause of `pause_s` loses the frames arriving during it
//! beyond the ring. Pauses come at `pause_at` instants: periodic, or from
//! a seeded exponential draw (a Poisson process), so every run of a test
//! sees the same pauses. The generator falls behind at and above
//! `gen_ceiling_pps` and in the trials listed in `stalled` (by index): such
//! a trial is troubled. A host spell (`spell`) troubles every trial from
//! one on until the search has backed off a number of times: a spell the
//! back-offs outlast. Time is counted, never waited: a back-off "waits"
//! a simulated second.

use super::controller::{BackOff, Measured, Measurer, Trouble};
use std::convert::Infallible;

/// A host gone busy from trial `from` on until the search backed off
/// `backoffs` times (`usize::MAX`: for good). With `evidence` the spell's
/// trials show it (as other work on the device's CPU does): their
/// trouble is the host's ([`Trouble::host`]); without it they only fall
/// behind, as a generator at its ceiling would.
#[derive(Debug, Clone, Copy)]
pub struct Spell {
    pub from: usize,
    pub backoffs: usize,
    pub evidence: bool,
}

/// When the host pauses the device.
#[derive(Debug, Clone)]
pub enum Pauses {
    None,
    /// Every `every_s`, the first at `every_s / 2`.
    Periodic {
        every_s: f64,
    },
    /// A Poisson process of mean interval `mean_s` from `seed`.
    Poisson {
        mean_s: f64,
        seed: u64,
    },
}

#[derive(Debug, Clone)]
pub struct SimDevice {
    pub capacity_pps: f64,
    pub ring_frames: f64,
    pub pause_s: f64,
    pub pauses: Pauses,
    /// The generator keeps no schedule at or above this load.
    pub gen_ceiling_pps: f64,
    /// Trials (0-based) in which the generator falls behind anyway.
    pub stalled: Vec<usize>,
    /// Trials from this one on are all behind (a host gone busy).
    pub busy_from: Option<usize>,
    /// A host spell the back-offs may outlast.
    pub spell: Option<Spell>,
    /// Back-offs asked for, and of them during the spell.
    pub backoffs: usize,
    spell_backoffs: usize,
    clock_s: f64,
    next_pause_s: f64,
    rng: u64,
    /// Trials run.
    pub n: usize,
}

impl SimDevice {
    pub fn new(capacity_pps: f64, ring_frames: f64, pause_s: f64, pauses: Pauses) -> SimDevice {
        let mut d = SimDevice {
            capacity_pps,
            ring_frames,
            pause_s,
            pauses,
            gen_ceiling_pps: f64::INFINITY,
            stalled: Vec::new(),
            busy_from: None,
            spell: None,
            backoffs: 0,
            spell_backoffs: 0,
            clock_s: 0.0,
            next_pause_s: f64::INFINITY,
            rng: 0,
            n: 0,
        };
        d.next_pause_s = match d.pauses {
            Pauses::None => f64::INFINITY,
            Pauses::Periodic { every_s } => every_s / 2.0,
            Pauses::Poisson { seed, .. } => {
                d.rng = seed ^ 0x9E37_79B9_7F4A_7C15;
                d.draw()
            }
        };
        d
    }

    /// The next gap of the Poisson process (splitmix64 → exponential).
    fn draw(&mut self) -> f64 {
        let Pauses::Poisson { mean_s, .. } = self.pauses else {
            return f64::INFINITY;
        };
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let u = ((z >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        -mean_s * u.ln()
    }

    /// Whether the spell troubles trial `i`.
    fn in_spell(&self, i: usize) -> bool {
        self.spell
            .is_some_and(|s| i >= s.from && self.spell_backoffs < s.backoffs)
    }

    /// One trial at `load` for `duration_s`.
    pub fn trial(&mut self, load: f64, duration_s: f64) -> Measured {
        let i = self.n;
        self.n += 1;
        let host = self.in_spell(i) && self.spell.is_some_and(|s| s.evidence);
        let behind = load >= self.gen_ceiling_pps
            || self.stalled.contains(&i)
            || self.busy_from.is_some_and(|b| i >= b)
            || self.in_spell(i);
        let end = self.clock_s + duration_s;
        let mut pauses = 0;
        while self.next_pause_s < end {
            pauses += 1;
            self.next_pause_s += match self.pauses {
                Pauses::Periodic { every_s } => every_s,
                _ => self.draw(),
            };
        }
        self.clock_s = end;
        let sent = load * duration_s;
        let overload = ((load - self.capacity_pps) * duration_s - self.ring_frames).max(0.0);
        let paused = f64::from(pauses) * (load * self.pause_s - self.ring_frames).max(0.0);
        let lost = (overload + paused).min(sent).round();
        Measured {
            loss_ratio: lost / sent.round().max(1.0),
            duration_s,
            wall_s: duration_s + 0.4,
            kept_schedule: !behind,
            trouble: match (host, behind) {
                (true, _) => Some("other work took 30% of the device's CPU"),
                (false, true) => Some("the generator fell behind its schedule"),
                (false, false) => None,
            }
            .map(|why| Trouble {
                why: why.to_owned(),
                host,
            }),
        }
    }
}

impl Measurer for &mut SimDevice {
    type Error = Infallible;
    fn trial(&mut self, load_pps: f64, duration_s: f64) -> Result<Option<Measured>, Infallible> {
        Ok(Some(SimDevice::trial(self, load_pps, duration_s)))
    }
    /// A simulated second; quiet once the spell is over.
    fn back_off(&mut self) -> Result<Option<BackOff>, Infallible> {
        self.backoffs += 1;
        if self.spell.is_some_and(|s| self.n > s.from) {
            self.spell_backoffs += 1;
        }
        let busy = self.in_spell(self.n) || self.busy_from.is_some_and(|b| self.n >= b);
        Ok(Some(BackOff {
            waited_s: 1.0,
            quiet: Some(!busy),
        }))
    }
}
