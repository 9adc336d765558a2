//! Small multiples: a figure whose records name more series than a legend
//! can hold ([`PANEL_SERIES`]) is drawn as panels side by side on the same
//! axes, each panel the records of one value of a parameter (`lookup
//! index`), so that every series is drawn and named, never dropped. (Issue
//! 34: a twelve-entry legend of two-line names under "12 series not
//! drawn".)
//!
//! Invariants: every record of the figure is in exactly one panel; a
//! panel holds at most [`PANEL_SERIES`] series (a stacked figure at most
//! [`MAX_CATEGORIES`] bars); the parameter chosen is the one that needs
//! the fewest panels, and when no one parameter is enough the panels are
//! split further by the next, then in order of first appearance; all
//! panels of a figure share their axes' ranges (drawn twice: once to learn
//! each panel's extent, once within their union); a figure is split into
//! at most [`MAX_PANELS`] panels, and what the last one cannot hold is
//! named in its caption.

use super::frame::{text_of, Frame};
use super::Figure;
use crate::plot::{Span, MAX_CATEGORIES};
use crate::ReportError;
use commbench_core::figure::FigureKind;
use commbench_core::record::Record;
use std::collections::{HashMap, HashSet};

/// Series a figure (or one panel of it) draws at most: a legend of more
/// cannot be read beside the plot.
pub(crate) const PANEL_SERIES: usize = 8;

/// Panels one figure is split into at most (the page is bounded too).
pub(crate) const MAX_PANELS: usize = 12;

/// One panel's members (indices into the items planned) and what they
/// share, in words (`lookup index`, `part 2 of 3`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Group {
    pub(crate) label: Vec<String>,
    pub(crate) members: Vec<usize>,
}

/// Items sharing one value of a parameter: the value in words and the
/// items.
type Valued = (String, Vec<usize>);

/// How a figure's items are split into panels.
pub(crate) struct Planner<'p> {
    /// The unit a panel's limit counts (a series name; a stacked figure's
    /// bar).
    pub(crate) unit: &'p dyn Fn(usize) -> String,
    /// An item's value of a parameter, in words (`lookup index`).
    pub(crate) value: &'p dyn Fn(usize, &str) -> Option<String>,
    /// The parameters that may split the items, in order of preference.
    pub(crate) keys: Vec<String>,
    /// Units per panel at most.
    pub(crate) limit: usize,
}

impl Planner<'_> {
    fn units(&self, members: &[usize]) -> usize {
        members
            .iter()
            .map(|&i| (self.unit)(i))
            .collect::<HashSet<_>>()
            .len()
    }

    /// The items grouped by their value of `key`, in first-seen order.
    fn by(&self, members: &[usize], key: &str) -> Vec<Valued> {
        let mut groups: Vec<Valued> = Vec::new();
        let mut ix: HashMap<String, usize> = HashMap::new();
        for &m in members {
            let v = (self.value)(m, key).unwrap_or_else(|| format!("no {key}"));
            match ix.get(&v) {
                Some(&g) => groups[g].1.push(m),
                None => {
                    ix.insert(v.clone(), groups.len());
                    groups.push((v, vec![m]));
                }
            }
        }
        groups
    }

    /// The panels of `members` (all of them in one when they fit).
    pub(crate) fn plan(&self, members: Vec<usize>) -> Vec<Group> {
        self.plan_with(members, &self.keys)
    }

    fn plan_with(&self, members: Vec<usize>, keys: &[String]) -> Vec<Group> {
        if self.units(&members) <= self.limit {
            return vec![Group {
                label: Vec::new(),
                members,
            }];
        }
        let splits: Vec<(usize, Vec<Valued>)> = keys
            .iter()
            .enumerate()
            .map(|(k, key)| (k, self.by(&members, key)))
            .filter(|(_, g)| g.len() >= 2)
            .collect();
        // The parameter whose every group fits, in the fewest panels.
        let fits = splits
            .iter()
            .filter(|(_, g)| g.iter().all(|(_, m)| self.units(m) <= self.limit))
            .min_by_key(|(_, g)| g.len());
        if let Some((_, groups)) = fits {
            return groups
                .iter()
                .map(|(v, m)| Group {
                    label: vec![v.clone()],
                    members: m.clone(),
                })
                .collect();
        }
        // None fits alone: the first that splits, then the rest within.
        if let Some((k, groups)) = splits.into_iter().next() {
            let rest: Vec<String> = keys[k + 1..].to_vec();
            return groups
                .into_iter()
                .flat_map(|(v, m)| {
                    self.plan_with(m, &rest).into_iter().map(move |mut g| {
                        g.label.insert(0, v.clone());
                        g
                    })
                })
                .collect();
        }
        self.chunks(members)
    }

    /// Consecutive runs of at most `limit` units, in first-seen order.
    fn chunks(&self, members: Vec<usize>) -> Vec<Group> {
        let mut order: Vec<String> = Vec::new();
        let mut place: HashMap<String, usize> = HashMap::new();
        for &m in &members {
            let u = (self.unit)(m);
            if !place.contains_key(&u) {
                place.insert(u.clone(), order.len());
                order.push(u);
            }
        }
        let n = order.len().div_ceil(self.limit);
        let mut groups: Vec<Group> = (0..n)
            .map(|i| Group {
                label: vec![format!("part {} of {n}", i + 1)],
                members: Vec::new(),
            })
            .collect();
        for m in members {
            groups[place[&(self.unit)(m)] / self.limit].members.push(m);
        }
        groups
    }
}

/// Where a panel sits among its figure's panels.
#[derive(Debug, Clone)]
pub(crate) struct PanelOf {
    /// What its records share (`lookup index`).
    pub(crate) label: String,
    pub(crate) index: usize,
    pub(crate) count: usize,
}

impl PanelOf {
    /// The figure's title with the panel's place.
    pub(crate) fn title(&self, title: &str) -> String {
        format!(
            "{title} — {} (panel {} of {})",
            self.label,
            self.index + 1,
            self.count
        )
    }
}

/// The sentence a panel's caption closes with.
pub(crate) const PANEL_SENTENCE: &str = "Drawn as panels side by side on the same axes, since a legend holds at most eight series: the figure's other series are in the panels beside this one.";

/// The panels of a declared figure's records, or one group when they
/// fit in one figure.
fn plan_frame(frame: &Frame) -> Vec<Group> {
    let stacked = matches!(frame.spec.kind, FigureKind::Stacked(_));
    let mine = &frame.mine;
    let unit = |i: usize| {
        let r = mine[i];
        if stacked {
            // A stack's bar: its category with its series.
            let x = r.params.get(frame.spec.x).map(text_of).unwrap_or_default();
            format!("{x}\u{1f}{}", frame.series_of(r))
        } else {
            frame.series_of(r)
        }
    };
    let value = |i: usize, key: &str| {
        mine[i]
            .params
            .get(key)
            .map(|v| format!("{} {}", key.replace('_', " "), text_of(v)))
    };
    let planner = Planner {
        unit: &unit,
        value: &value,
        keys: frame.vary.iter().map(|k| (*k).to_owned()).collect(),
        limit: if stacked {
            MAX_CATEGORIES
        } else {
            PANEL_SERIES
        },
    };
    planner.plan((0..mine.len()).collect())
}

/// Draws a declared figure whole, or as panels on shared axes when its
/// series do not fit one legend. `draw` draws one frame (None: nothing
/// to draw); `not_drawn` stands in for a panel with nothing to draw.
pub(super) fn draw_declared(
    whole: &Frame,
    draw: &dyn Fn(&Frame) -> Result<Option<Figure>, ReportError>,
    not_drawn: &dyn Fn(&[&Record]) -> Option<Figure>,
) -> Result<Vec<Figure>, ReportError> {
    let mut groups = plan_frame(whole);
    if groups.len() <= 1 {
        return Ok(draw(whole)?.into_iter().collect());
    }
    // Past MAX_PANELS, the last panel takes the rest: its plot names what
    // it cannot draw.
    if groups.len() > MAX_PANELS {
        let rest: Vec<Group> = groups.split_off(MAX_PANELS - 1);
        let members = rest.iter().flat_map(|g| g.members.clone()).collect();
        groups.push(Group {
            label: vec![format!("the other {} groups", rest.len())],
            members,
        });
    }
    let count = groups.len();
    let frames: Vec<Frame> = groups
        .into_iter()
        .enumerate()
        .map(|(index, g)| {
            let records: Vec<&Record> = g.members.iter().map(|&i| whole.mine[i]).collect();
            whole.panel(
                records,
                PanelOf {
                    label: g.label.join(", "),
                    index,
                    count,
                },
            )
        })
        .collect();
    // Once to learn what each panel spans, once within their union.
    let mut span = Span::default();
    for f in &frames {
        if let Some(fig) = draw(f)? {
            span = span.union(fig.extent);
        }
    }
    let mut figs = Vec::new();
    for f in frames {
        let f = f.within(span);
        match draw(&f)? {
            Some(fig) => figs.push(fig),
            None => figs.extend(not_drawn(&f.mine).map(|mut fig| {
                fig.title = f.title();
                fig
            })),
        }
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Items of (engine, lookup, run) as a mux overlay names them.
    fn plan(items: &[[&str; 3]], keys: &[&str], limit: usize) -> Vec<Group> {
        let unit = |i: usize| items[i].join(", ");
        let value = |i: usize, k: &str| {
            let at = ["engine", "lookup", "run"].iter().position(|x| *x == k)?;
            Some(format!("{k} {}", items[i][at]))
        };
        Planner {
            unit: &unit,
            value: &value,
            keys: keys.iter().map(|k| (*k).to_owned()).collect(),
            limit,
        }
        .plan((0..items.len()).collect())
    }

    fn grid() -> Vec<[&'static str; 3]> {
        let mut items = Vec::new();
        for run in ["a", "b"] {
            for engine in ["poll", "epoll-lt", "epoll-et", "io-uring"] {
                for lookup in ["scan", "index"] {
                    items.push([engine, lookup, run]);
                }
            }
        }
        items
    }

    #[test]
    fn series_that_fit_one_legend_are_one_panel() {
        let items = &grid()[..8];
        let g = plan(items, &["engine", "lookup"], 8);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].members, (0..8).collect::<Vec<_>>());
        assert!(g[0].label.is_empty());
    }

    /// Sixteen series (four engines × two lookups × two runs): the
    /// parameter needing the fewest panels wins (two lookups, not four
    /// engines), and every record is in one panel.
    #[test]
    fn sixteen_series_split_by_the_parameter_needing_fewest_panels() {
        let items = grid();
        let g = plan(&items, &["engine", "lookup"], 8);
        let labels: Vec<String> = g.iter().map(|g| g.label.join(", ")).collect();
        assert_eq!(labels, ["lookup scan", "lookup index"]);
        let mut all: Vec<usize> = g.iter().flat_map(|g| g.members.clone()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..16).collect::<Vec<_>>());
        assert!(g.iter().all(|g| g.members.len() == 8));
    }

    /// No one parameter is enough at four series a panel: lookup first,
    /// then engine within, each panel within the limit.
    #[test]
    fn when_no_parameter_is_enough_the_next_splits_each_panel() {
        let items = grid();
        let g = plan(&items, &["lookup", "engine"], 2);
        assert_eq!(g.len(), 8);
        assert_eq!(g[0].label, ["lookup scan", "engine poll"]);
        assert!(g.iter().all(|g| g.members.len() == 2));
    }

    /// Series that no parameter tells apart (runs only) are cut in order.
    #[test]
    fn series_no_parameter_splits_are_cut_in_first_seen_order() {
        let items = grid();
        let g = plan(&items, &[], 6);
        let labels: Vec<String> = g.iter().map(|g| g.label.join(", ")).collect();
        assert_eq!(labels, ["part 1 of 3", "part 2 of 3", "part 3 of 3"]);
        assert_eq!(g[0].members, (0..6).collect::<Vec<_>>());
        assert_eq!(g[2].members.len(), 4);
    }
}
