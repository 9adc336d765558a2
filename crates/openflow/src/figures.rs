//! The figures this lab declares for the report: the seed's question —
//! how much does a prepared flow_mod template save over building it? — as
//! bars per variant (naive, template, and the trivial responder that marks
//! the emulator's ceiling), in responses per second (log scale when the
//! bars span decades, as against os-ken) and controller CPU per response.

use commbench_core::figure::{FigureKind, FigureSpec};

pub fn figures() -> Vec<FigureSpec> {
    vec![
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "openflow",
            test: "bench",
            title: "openflow: responses per second, naive vs template vs trivial",
            caption: "How much faster is the controller that patches a prepared flow_mod than the one that builds it? 'trivial' answers without parsing: the emulator's ceiling. Higher is better.",
            x: "variant",
            y: "responses_per_s_median",
            series: &["switches", "mode"],
            filter: None,
            x_label: "controller variant",
            y_label: "",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "openflow",
            test: "bench",
            title: "openflow: controller CPU per response (ns)",
            caption: "CPU the controller spent per flow_mod sent (getrusage): what the template saves, independent of the machine's load. Lower is better.",
            x: "variant",
            y: "controller_ns_per_response",
            series: &["switches", "mode"],
            filter: None,
            x_label: "controller variant",
            y_label: "",
            reference: None,
            more_x: "",
        },
        FigureSpec {
            kind: FigureKind::Bar,
            lab: "openflow",
            test: "cbench",
            title: "openflow: cbench responses per second",
            caption: "cbench-compatible runs against the controller named in each series.",
            x: "mode",
            y: "responses_per_s_median",
            series: &["controller", "switches"],
            filter: None,
            x_label: "cbench mode",
            y_label: "",
            reference: None,
            more_x: "",
        },
    ]
}
