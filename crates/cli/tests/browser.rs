//! The report in a real browser: a quick suite's report.html is opened in
//! headless Chromium with a small checking script appended to a copy of
//! the page; the script measures the laid-out page (every figure has drawn
//! marks and a title; both axes carry a label drawn in the plot, the y one
//! with a unit; no legend entry overlaps a mark; every in-page link
//! resolves; no table cell, collapsed blocks opened, is narrower than 4
//! ems; every number a figure's computed caption quotes is among the
//! figure's numbers, or a ratio of two of them; no table runs past the
//! page edge outside its scroll box; the summary and the machine line are
//! visible), writes its verdict into the DOM, and `--dump-dom` hands it
//! back. A screenshot is taken too
//! and checked for non-blank content. A report built from hostile result
//! files is opened the same way to see that none of the markup they carry
//! runs. Skipped, with a message, when no Chromium is installed outside
//! CI; under `CI=true` a missing Chromium fails (`.ci/run` installs
//! Debian's `chromium`).

use crate::util;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(b))
                    .find(|f| f.is_file())
            })
        })
}

const CHECK: &str = r##"
<script>
window.addEventListener('load', () => {
  const out = { figures: [], not_drawn: [], overflow: [], summary_rows: 0, machine_visible: false, env_visible: false, width: window.innerWidth,
                axes: [], legend_overlaps: [], broken_links: [], links: 0, narrow_cells: [], cells: 0, caption_numbers: [], numbers_checked: 0,
                legends: [], two_line_names: [], more: [], left_out: [],
                few_x: [], title_units: [], dup_ticks: [], changes_off: [],
                height_closed: document.documentElement.scrollHeight, screen: window.innerHeight };
  // Open every collapsed block so that its tables are laid out too.
  for (const d of document.querySelectorAll('details')) d.open = true;
  const boxes = (els) => [...els].map(e => e.getBoundingClientRect()).filter(r => r.width > 0 || r.height > 0);
  const meets = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const tokens = (s) => [...s.matchAll(/(\d+(?:\.\d+)?)([kMG]?)(×?)/g)].map(m => ({ num: m[1] + m[2], ratio: m[3] === '×', v: parseFloat(m[1]), digits: (m[1].split('.')[1] || '').length }));
  for (const f of document.querySelectorAll('figure')) {
    const svg = f.querySelector('svg');
    const title = (f.querySelector('figcaption b') || {}).textContent || '';
    // A declared figure with nothing to draw says why in its place.
    const why = (f.querySelector('figcaption .computed') || {}).textContent || '';
    if (!svg && why.startsWith('Not drawn: ')) { out.not_drawn.push(title); continue; }
    const marks = svg ? svg.querySelectorAll('rect, circle, polyline, path, line, polygon') : [];
    const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
    out.figures.push({ title, marks: marks.length, w: box.width, h: box.height });
    // Axes: a label on each, the y one with a unit, both drawn in the plot.
    const texts = svg ? [...svg.querySelectorAll('text')].map(t => t.textContent.trim()) : [];
    const x = f.getAttribute('data-x') || '', y = f.getAttribute('data-y') || '';
    if (!x || !texts.includes(x) || !/\(.+\)/.test(y) || !texts.includes(y)) out.axes.push({ title, x, y });
    // A line or dot chart has three x values or more (one is bars or a
    // table, two are bars side by side), by the figure's own numbers.
    const kinds = [...f.querySelectorAll('ul.legend .sw')].map(s => [...s.classList].find(c => c !== 'sw'));
    const numbers = f.querySelector('details.data table');
    if (numbers && kinds.some(k => k === 'line' || k === 'dot')) {
      const heads = [...numbers.querySelectorAll('tr:first-child th')].map(t => t.textContent);
      const xi = heads.findIndex(h => h && x.startsWith(h));
      if (xi >= 0) {
        const xs = new Set([...numbers.querySelectorAll('tr')].slice(1).map(r => (r.children[xi] || {}).textContent));
        if (xs.size < 3) out.few_x.push({ title, x, values: xs.size });
      }
    }
    // A title's unit is its y axis's ("(ns)" over an axis in µs).
    const unitOf = (s) => { const m = s.match(/\((?:[^()]*,\s*)?(ns|µs|ms|s)\)/); return m ? m[1] : null; };
    if (unitOf(title) && unitOf(y) && unitOf(title) !== unitOf(y)) out.title_units.push({ title, y });
    // No tick label twice on one axis, and no 0 on a log axis: tick
    // labels of the y axis share their right edge, the x axis's their top.
    if (svg) {
      const ticks = [...svg.querySelectorAll('text')].filter(t => /^-?[\d.]+(e[-+]?\d+)?[kMG]?$/.test(t.textContent.trim()));
      for (const edge of ['right', 'top']) {
        const groups = {};
        for (const t of ticks) { const k = Math.round(t.getBoundingClientRect()[edge]); (groups[k] = groups[k] || []).push(t.textContent.trim()); }
        for (const g of Object.values(groups).filter(g => g.length > 1)) {
          const dup = g.filter((v, i) => g.indexOf(v) !== i);
          if (dup.length) out.dup_ticks.push({ title, dup });
          if (edge === 'right' && y.includes('log scale') && g.includes('0')) out.dup_ticks.push({ title, zero_on_log: true });
        }
      }
    }
    // Legends: beside the plot, never over a mark.
    const markBoxes = boxes([...marks].filter(m => !(m.tagName === 'rect' && m.getAttribute('width') === svg.getAttribute('width'))));
    const lis = [...f.querySelectorAll('ul.legend li')];
    out.legends.push({ title, entries: lis.length });
    for (const li of lis) {
      const r = li.getBoundingClientRect();
      if (markBoxes.some(m => meets(r, m))) out.legend_overlaps.push({ title, legend: li.textContent });
      // A name that wraps is a legend a reader cannot scan.
      const cs = getComputedStyle(li);
      const line = parseFloat(cs.lineHeight) || 1.25 * parseFloat(cs.fontSize);
      if (r.height > 1.6 * line) out.two_line_names.push({ title, name: li.textContent });
    }
    // A line drawn as dots says, on screen, what would measure a curve.
    const more = f.querySelector('figcaption .more');
    if (more) out.more.push({ title, shown: more.getBoundingClientRect().height > 0, text: more.textContent });
    const left = f.querySelector('figcaption .left-out');
    if (left) out.left_out.push({ title, text: left.textContent });
    // Caption numbers: each is in the figure's numbers (a value, a
    // parameter, a count) or, followed by ×, a ratio of two drawn values.
    const computed = (f.querySelector('figcaption .computed') || {}).textContent || '';
    const data = f.querySelector('details.data');
    const dataText = data ? [...data.querySelectorAll('th, td, p')].map(e => e.textContent).join(' | ') : '';
    const have = new Set(tokens(dataText).map(t => t.num));
    const raws = data ? [...data.querySelectorAll('td[data-v]')].map(td => parseFloat(td.getAttribute('data-v'))).filter(v => v > 0) : [];
    for (const t of tokens(computed)) {
      out.numbers_checked++;
      let ok;
      if (t.ratio) {
        const tol = t.digits > 0 ? 0.051 : 0.51;
        ok = raws.some(a => raws.some(b => Math.abs(a / b - t.v) <= tol + 1e-9));
      } else {
        ok = have.has(t.num);
      }
      if (!ok) out.caption_numbers.push({ title, number: t.num + (t.ratio ? '×' : '') });
    }
  }
  // In-page links resolve.
  for (const a of document.querySelectorAll('a[href^="#"]')) {
    out.links++;
    if (!document.getElementById(decodeURIComponent(a.getAttribute('href').slice(1)))) out.broken_links.push(a.getAttribute('href'));
  }
  // No table cell narrower than 4 ems of its own type.
  for (const c of document.querySelectorAll('td, th')) {
    const r = c.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    out.cells++;
    const em = parseFloat(getComputedStyle(c).fontSize);
    if (r.width < 4 * em - 0.5) out.narrow_cells.push({ text: c.textContent.slice(0, 40), w: r.width, em });
  }
  out.narrow_cells = out.narrow_cells.slice(0, 20);
  for (const t of document.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (r.right > window.innerWidth + 1) {
      const s = t.closest('.scroll');
      const sr = s ? s.getBoundingClientRect() : null;
      if (!s || sr.right > window.innerWidth + 1 || getComputedStyle(s).overflowX !== 'auto') {
        out.overflow.push((t.querySelector('th') || {}).textContent || 'table');
      }
    }
  }
  const visible = (el) => {
    if (!el) return false;
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && cs.visibility !== 'hidden' && cs.color !== getComputedStyle(document.body).backgroundColor;
  };
  // The overlay's columns are all on screen, their headers unbroken.
  for (const th of document.querySelectorAll('#changes ~ .scroll table th')) {
    const r = th.getBoundingClientRect();
    if (r.right > window.innerWidth + 1 || th.scrollWidth > th.clientWidth + 1) out.changes_off.push(th.textContent);
  }
  out.summary_rows = document.querySelectorAll('table.summary tr').length - 1;
  out.machine_visible = visible(document.querySelector('p.muted')) && document.querySelector('p.muted').textContent.includes('CPUs');
  const env = [...document.querySelectorAll('details')].find(d => !d.classList.contains('data') && d.querySelector('table.env'));
  out.env_visible = !!env && [...env.querySelectorAll('td')].some(visible);
  document.body.setAttribute('data-check', JSON.stringify(out));
});
</script>
"##;

/// Issue 51, the report as a person sees it at 1400 px: no line or dot
/// chart of fewer than three x values (seven default-suite figures drew a
/// dot on an empty 0.9–1.1 axis), a title's unit its axis's ("(ns)" over
/// µs), no tick label twice on an axis ("0.01, 0.01") and no 0 on a log
/// one, every overlay column on screen with its header unbroken, and the
/// page, its extra figures and tables folded, at most `screens` screens
/// (the default suite's was ~20).
fn as_a_person_sees_it(v: &Value, screens: u64) {
    for k in ["few_x", "title_units", "dup_ticks", "changes_off"] {
        assert_eq!(v[k], serde_json::json!([]), "{k}: {}", v[k]);
    }
    let (h, screen) = (
        v["height_closed"].as_u64().unwrap(),
        v["screen"].as_u64().unwrap(),
    );
    assert!(
        h <= screens * screen,
        "the page is {h} px tall folded, {:.1} screens of {screen} px",
        h as f64 / screen as f64
    );
}

/// Runs Chromium; returns what it printed on stdout (through a file, so a
/// large DOM never fills a pipe nobody reads while we wait).
fn run_chromium(bin: &Path, args: &[&str], url: &str, out: &Path) -> String {
    let file = std::fs::File::create(out).expect("stdout file");
    let mut child = std::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--window-size=1400,1000",
            "--virtual-time-budget=5000",
        ])
        .args(args)
        .arg(url)
        .stdout(Stdio::from(file))
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromium");
    // Safety bound only: a hung browser must not hang the test suite.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.wait();
    std::fs::read_to_string(out).unwrap_or_default()
}

/// Chromium, or `None` (with a message) when it is not installed outside
/// CI; under `CI=true` a missing Chromium fails the test (`.ci/run`
/// installs it).
fn chromium_or_skip() -> Option<PathBuf> {
    let bin = chromium();
    if bin.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "no chromium on PATH under CI=true: .ci/run installs Debian's chromium"
        );
        commbench_core::testing::skip("chromium", "no chromium on PATH (apt-get install chromium)");
    }
    bin
}

#[test]
fn report_in_headless_chromium_draws_every_figure_and_keeps_tables_in_their_boxes() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbtest-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    util::cb()
        .args(["suite", "--quick", "--skip", "openflow,mux", "--out"])
        .arg(&dir)
        .assert()
        .success();
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let checked = dir.join("checked.html");
    std::fs::write(
        &checked,
        page.replace("</body>", &format!("{CHECK}</body>")),
    )
    .unwrap();
    let url = format!("file://{}", checked.display());
    let dom = run_chromium(&bin, &["--dump-dom"], &url, &dir.join("dom.html"));
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "the check script did not run; dom starts: {}",
                &dom[..dom.len().min(400)]
            )
        });
    let json = attr
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    let v: Value = serde_json::from_str(&json).unwrap();
    let figs = v["figures"].as_array().unwrap();
    assert!(figs.len() >= 8, "too few figures: {v}");
    for f in figs {
        assert!(
            !f["title"].as_str().unwrap().is_empty(),
            "untitled figure: {f}"
        );
        assert!(
            f["marks"].as_u64().unwrap() > 4,
            "figure without marks: {f}"
        );
        assert!(
            f["w"].as_f64().unwrap() > 100.0 && f["h"].as_f64().unwrap() > 100.0,
            "{f}"
        );
    }
    assert_eq!(
        v["overflow"],
        serde_json::json!([]),
        "tables past the page edge: {v}"
    );
    assert_eq!(
        v["axes"],
        serde_json::json!([]),
        "axes without a label (or a y axis without a unit): {}",
        v["axes"]
    );
    assert_eq!(
        v["legend_overlaps"],
        serde_json::json!([]),
        "legend entries over marks: {}",
        v["legend_overlaps"]
    );
    assert!(v["links"].as_u64().unwrap() >= 4, "{}", v["links"]);
    assert_eq!(
        v["broken_links"],
        serde_json::json!([]),
        "in-page links to nothing: {}",
        v["broken_links"]
    );
    assert!(v["cells"].as_u64().unwrap() > 100, "{}", v["cells"]);
    assert_eq!(
        v["narrow_cells"],
        serde_json::json!([]),
        "table cells narrower than 4 ems: {}",
        v["narrow_cells"]
    );
    assert!(
        v["numbers_checked"].as_u64().unwrap() >= 20,
        "{}",
        v["numbers_checked"]
    );
    assert_eq!(
        v["caption_numbers"],
        serde_json::json!([]),
        "caption numbers that are not in the figure's data: {}",
        v["caption_numbers"]
    );
    assert!(v["summary_rows"].as_u64().unwrap() >= 4, "{v}");
    assert_eq!(v["machine_visible"], true, "{v}");
    assert_eq!(v["env_visible"], true, "{v}");
    as_a_person_sees_it(&v, 10);

    // And the page as drawn is not blank: the screenshot has many colours.
    let shot = dir.join("shot.png");
    let arg = format!("--screenshot={}", shot.display());
    run_chromium(
        &bin,
        &[&arg],
        &format!("file://{}", dir.join("report.html").display()),
        &dir.join("shot.out"),
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    // A blank white page compresses to a few KiB; this one has text and plots.
    assert!(
        png.len() > 30_000,
        "screenshot looks blank ({} bytes)",
        png.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What each payload would do if it ran: mark the page.
const PAYLOADS: [&str; 4] = [
    "<script>window.__pwned='script';document.title='PWNED'</script>",
    "\"><img src=x onerror=\"window.__pwned='img';document.body.setAttribute('data-pwned','img')\">",
    "'><svg onload=\"window.__pwned='svg'\">",
    "</title></textarea><iframe srcdoc=\"<script>parent.__pwned='iframe'</script>\"></iframe>",
];

/// Reads what the page's own checking script found: every `<script>`,
/// `<img>`, `<iframe>` and `on…` attribute on the page, the title, whether
/// any payload ran, and whether the payloads show as text.
const HOSTILE_CHECK: &str = r#"
<script>
window.addEventListener('load', () => {
  setTimeout(() => {
    const on = [...document.querySelectorAll('*')].filter(e => [...e.attributes].some(a => a.name.startsWith('on'))).length;
    const out = {
      pwned: window.__pwned || null,
      marked: document.body.getAttribute('data-pwned'),
      title: document.title,
      scripts: document.scripts.length,
      imgs: document.images.length,
      iframes: document.querySelectorAll('iframe, foreignObject, textarea').length,
      on_attributes: on,
      text_shown: document.querySelector('h1').textContent.includes('<script>window.__pwned='),
      img_shown: [...document.querySelectorAll('td')].some(td => td.textContent.includes('<img src=x onerror=')),
      figures: document.querySelectorAll('figure svg').length,
    };
    document.body.setAttribute('data-check', JSON.stringify(out));
  }, 200);
});
</script>
"#;

/// A result file whose every string is a payload: host name, CPU model,
/// command line, kernel, lab, test, string parameters (series and category
/// names) and string metrics.
fn hostile_results(host: &str) -> Value {
    let [script, img, svg, frame] = PAYLOADS;
    let rec = |lab: String, test: &str, n: u64, rate: f64| {
        serde_json::json!({
            "schema_version": 1,
            "lab": lab,
            "test": test,
            "params": {
                "transport": if n.is_multiple_of(2) { format!("shm{img}") } else { format!("uds{script}") },
                "size": format!("64{svg}"),
                "sessions": n,
                "kind": format!("{frame}{}", n % 2),
            },
            "metrics": {
                "msgs_per_s": rate,
                "cpu_ns_per_op": 100.0 + n as f64,
                "note": format!("{script}{img}"),
            },
        })
    };
    let mut records = Vec::new();
    for n in 1..=6u64 {
        records.push(rec("ipc".into(), "reqres", n, 1000.0 * n as f64));
        records.push(rec(
            format!("lab{img}"),
            &format!("t{script}"),
            n,
            10.0 * n as f64,
        ));
    }
    serde_json::json!({
        "environment": {
            "hostname": format!("{host}{script}{img}"),
            "started_utc": "2026-11-24T10:00:00Z",
            "cpu_model": format!("{img}{script}"),
            "kernel": svg,
            "logical_cpus": 2,
            "command_line": ["commbench", script, img, svg, frame],
        },
        "records": records,
    })
}

#[test]
fn report_of_hostile_results_runs_no_script_in_headless_chromium() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbtest-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, hostile_results("alpha").to_string()).unwrap();
    std::fs::write(&b, hostile_results("beta").to_string()).unwrap();
    let page = dir.join("report.html");
    util::cb()
        .args(["--no-store", "report"])
        .arg(&a)
        .arg(&b)
        .arg("--title")
        .arg(PAYLOADS.concat())
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("<script"), "a script tag in the page");
    let checked = dir.join("checked.html");
    std::fs::write(
        &checked,
        html.replace("</body>", &format!("{HOSTILE_CHECK}</body>")),
    )
    .unwrap();
    let url = format!("file://{}", checked.display());
    let dom = run_chromium(&bin, &["--dump-dom"], &url, &dir.join("dom.html"));
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "the check script did not run; dom starts: {}",
                &dom[..dom.len().min(400)]
            )
        });
    let json = attr
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["pwned"], Value::Null, "a payload ran: {v}");
    assert_eq!(v["marked"], Value::Null, "a payload ran: {v}");
    assert_ne!(v["title"], "PWNED", "{v}");
    assert!(
        v["title"].as_str().unwrap().contains("<script>"),
        "the title shows the payload as text: {v}"
    );
    assert_eq!(v["scripts"], 1, "only the checking script: {v}");
    assert_eq!(v["imgs"], 0, "{v}");
    assert_eq!(v["iframes"], 0, "{v}");
    assert_eq!(v["on_attributes"], 0, "{v}");
    assert_eq!(v["text_shown"], true, "the payloads show as text: {v}");
    assert_eq!(v["img_shown"], true, "{v}");
    assert!(
        v["figures"].as_u64().unwrap() >= 2,
        "figures still drawn: {v}"
    );
    // And the DOM as Chromium parsed it carries the payloads as escaped text.
    assert!(
        dom.contains("&lt;script&gt;window.__pwned='script'"),
        "escaped text"
    );
    assert!(!dom.contains("data-pwned=\"img\""));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Measures where the "what changed" table's verdict cells sit.
const VERDICT_CHECK: &str = r##"
<script>
window.addEventListener('load', () => {
  const cells = [...document.querySelectorAll('#changes ~ .scroll td.verdict')];
  const head = document.querySelector('#changes ~ .scroll th');
  const out = { width: window.innerWidth, cells: cells.length, head: head ? head.textContent : '',
                off_screen: cells.filter(c => { const r = c.getBoundingClientRect(); return r.left < 0 || r.right > window.innerWidth; }).map(c => c.textContent) };
  document.body.setAttribute('data-check', JSON.stringify(out));
});
</script>
"##;

/// In the two-run report the verdict column sat off-screen at 1400 px,
/// behind a 300-character column of parameters: the verdict is now the
/// first column and only the parameters that vary are shown.
#[test]
fn two_run_report_shows_the_verdict_column_on_screen_at_1400_px() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbtest-verdicts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, host: &str, f: f64| {
        let s = |x: f64| serde_json::json!([x * 0.99, x, x * 1.01, x * 0.995, x * 1.005]);
        let recs: Vec<Value> = (1..=3)
            .map(|burst| {
                let ticks = 10.0 * burst as f64 * f;
                serde_json::json!({"schema_version": 2, "lab": "pipeline", "test": "run",
                    "params": {"mode": "rtc", "burst": burst, "work": "x".repeat(300)},
                    "metrics": {"ticks_total": ticks, "ticks_total_samples": s(ticks)}})
            })
            .collect();
        let doc = serde_json::json!({"schema_version": 2,
            "environment": {"hostname": host, "started_utc": "2026-11-26T10:00:00Z", "logical_cpus": 2},
            "records": recs});
        let p = dir.join(name);
        std::fs::write(&p, doc.to_string()).unwrap();
        p
    };
    let (a, b) = (write("a.json", "alpha", 1.0), write("b.json", "beta", 2.0));
    let page = dir.join("report.html");
    util::cb()
        .args(["--no-store", "report"])
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    let checked = dir.join("checked.html");
    std::fs::write(
        &checked,
        html.replace("</body>", &format!("{VERDICT_CHECK}</body>")),
    )
    .unwrap();
    let url = format!("file://{}", checked.display());
    let dom = run_chromium(&bin, &["--dump-dom"], &url, &dir.join("dom.html"));
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the check script did not run");
    let v: Value =
        serde_json::from_str(&attr.replace("&quot;", "\"").replace("&amp;", "&")).unwrap();
    assert_eq!(v["width"], 1400, "{v}");
    assert_eq!(v["cells"], 3, "one verdict per test: {v}");
    assert_eq!(v["head"], "verdict", "{v}");
    assert_eq!(v["off_screen"], serde_json::json!([]), "{v}");
    let changes = html.split("id=\"changes\"").nth(1).unwrap();
    let changes = changes.split("<h2").next().unwrap();
    assert!(
        !changes.contains(&"x".repeat(100)),
        "the shared parameter is shown in the table"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Loads a page with `script` appended in Chromium and returns what the
/// script wrote into `data-check`.
fn check_page(bin: &Path, dir: &Path, page: &Path, script: &str) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let checked = dir.join("checked.html");
    std::fs::write(
        &checked,
        html.replace("</body>", &format!("{script}</body>")),
    )
    .unwrap();
    let url = format!("file://{}", checked.display());
    let dom = run_chromium(bin, &["--dump-dom"], &url, &dir.join("dom.html"));
    let attr = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "the check script did not run; dom starts: {}",
                &dom[..dom.len().min(400)]
            )
        });
    let json = attr
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap()
}

/// The stored quick suite as a JSON Lines file from `host`, with mux's
/// open-loop records at two offered rates (the suite's hockey stick).
fn quick_suite_from(host: &str, dir: &Path) -> PathBuf {
    let text = include_str!("data/quick-suite.jsonl");
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut r: Value = serde_json::from_str(line).unwrap();
        if let Some(env) = r.get_mut("environment").and_then(Value::as_object_mut) {
            env.insert("hostname".into(), Value::from(host));
        }
        lines.push(r.to_string());
    }
    for rate in [2000.0, 8000.0] {
        for (engine, p99) in [("poll", 90_000.0), ("epoll-lt", 60_000.0)] {
            lines.push(
                serde_json::json!({"schema_version": 1, "lab": "mux", "test": "open",
                    "params": {"engine": engine, "lookup": "index", "conns": 1000, "protocol": "http1", "rate": rate},
                    "metrics": {"corrected_p99_ns": p99 * rate / 2000.0, "rt_per_s": rate}})
                .to_string(),
            );
        }
    }
    let p = dir.join(format!("{host}.jsonl"));
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// Issue 34: "a 12-entry legend of two-line names with '12 series not
/// drawn'" and "the C10K 'hockey stick' from two points". Two overlaid
/// quick suites name up to sixteen series a figure: every legend holds at
/// most eight names of one line each (more are panels), nothing says
/// "series past the first", and the hockey stick of two offered rates is
/// bars side by side with the command for a curve on screen; and the
/// page passes [`as_a_person_sees_it`] (overlaid, at most 12 screens).
#[test]
fn overlaid_suites_in_headless_chromium_have_short_legends_in_panels_and_two_rates_as_bars() {
    let Some(bin) = chromium_or_skip() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("cbtest-legends-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (
        quick_suite_from("alpha", &dir),
        quick_suite_from("beta", &dir),
    );
    let page = dir.join("report.html");
    util::cb()
        .args(["--no-store", "report"])
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let v = check_page(&bin, &dir, &page, CHECK);
    let legends = v["legends"].as_array().unwrap();
    assert!(legends.len() >= 20, "{v}");
    for l in legends {
        assert!(
            l["entries"].as_u64().unwrap() <= 8,
            "a legend of more than eight: {l}"
        );
    }
    assert!(
        legends
            .iter()
            .any(|l| l["title"].as_str().unwrap().contains("(panel 2 of")),
        "sixteen series are drawn as panels: {legends:?}"
    );
    assert_eq!(
        v["two_line_names"],
        serde_json::json!([]),
        "{}",
        v["two_line_names"]
    );
    assert_eq!(
        v["legend_overlaps"],
        serde_json::json!([]),
        "{}",
        v["legend_overlaps"]
    );
    for l in v["left_out"].as_array().unwrap() {
        assert!(!l["text"].as_str().unwrap().contains("series past"), "{l}");
    }
    let more = v["more"].as_array().unwrap();
    let stick = more
        .iter()
        .find(|m| m["title"].as_str().unwrap().contains("hockey stick"))
        .unwrap_or_else(|| panic!("the hockey stick says how to measure a curve: {more:?}"));
    assert_eq!(stick["shown"], true, "{stick}");
    assert!(
        stick["text"].as_str().unwrap().contains("--rate-sweep"),
        "{stick}"
    );
    for f in v["figures"].as_array().unwrap() {
        assert!(
            f["marks"].as_u64().unwrap() > 4,
            "figure without marks: {f}"
        );
    }
    assert_eq!(
        v["caption_numbers"],
        serde_json::json!([]),
        "{}",
        v["caption_numbers"]
    );
    as_a_person_sees_it(&v, 12);
    let _ = std::fs::remove_dir_all(&dir);
}
