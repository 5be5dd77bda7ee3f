//! An interactive flame graph as one self-contained SVG, written here (no third-party flame
//! graph code). The root is at the bottom; each node is a `<g class="f">` holding one `<rect>`
//! and its label, with its position in event units (`data-s` start, `data-n` width) so the
//! embedded script can zoom (click a frame; click "Reset zoom" or press Escape to undo) and
//! search (Ctrl-F or "Search": a regex over frame labels, matches highlighted and their share
//! of the view shown).

use std::fmt::Write as _;
use std::io::{self, Write};

use lucce_decoder::Cct;

use super::{percent, Labeler};

#[derive(Debug, Clone)]
pub struct SvgOptions {
    pub title: String,
    /// Image width in pixels.
    pub width: u32,
    /// Leave out subtrees narrower than this many pixels (0 keeps every node, so the image has
    /// exactly one rect per node; flamegraph.pl's default is 0.1).
    pub min_width: f64,
    /// What the counts are (shown in tooltips).
    pub unit: String,
}

impl Default for SvgOptions {
    fn default() -> Self {
        SvgOptions { title: "Flame graph".into(), width: 1200, min_width: 0.1, unit: "events".into() }
    }
}

const FRAME_H: u32 = 16;
const TOP: u32 = 40;
const BOTTOM: u32 = 24;
const PAD: f64 = 10.0;

/// Writes the flame graph of `cct`.
pub fn write_svg(out: &mut dyn Write, cct: &Cct, labeler: &Labeler<'_>, opts: &SvgOptions) -> io::Result<()> {
    let all = cct.total(0).events;
    let levels = cct.max_depth() + 1;
    let height = TOP + levels * FRAME_H + BOTTOM;
    let w = opts.width as f64;
    let inner = w - 2.0 * PAD;
    let scale = if all == 0 { 0.0 } else { inner / all as f64 };

    let mut s = String::new();
    let _ = writeln!(s, r#"<?xml version="1.0" encoding="UTF-8" standalone="no"?>"#);
    let _ = writeln!(
        s,
        r#"<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" viewBox="0 0 {} {height}" data-total="{all}" data-levels="{levels}" style="background-color:#f8f8f8">"#,
        opts.width, opts.width
    );
    let _ = writeln!(
        s,
        "<style>text{{font-family:Verdana,sans-serif;font-size:12px;fill:#000}}.f text{{pointer-events:none}}.f:hover rect{{stroke:#000;stroke-width:0.5}}#title{{font-size:17px;text-anchor:middle}}.btn{{cursor:pointer;fill:#06c}}.hide{{display:none}}</style>"
    );
    let _ = writeln!(s, r#"<text id="title" x="{}" y="24">{}</text>"#, w / 2.0, esc(&opts.title));
    let _ = writeln!(s, r#"<text id="reset" class="btn hide" x="{PAD}" y="24">Reset zoom</text>"#);
    let _ = writeln!(s, r#"<text id="search" class="btn" x="{}" y="24" text-anchor="end">Search</text>"#, w - PAD);
    let _ = writeln!(s, r#"<text id="matched" x="{}" y="{}" text-anchor="end"> </text>"#, w - PAD, height - 6);
    let _ = writeln!(s, r#"<text id="details" x="{PAD}" y="{}"> </text>"#, height - 6);
    let _ = writeln!(s, r#"<g id="frames" data-unit="{}">"#, esc(&opts.unit));

    // Pre-order walk keeping each node's start offset (in events) within its parent.
    let mut start = vec![0u64; cct.len()];
    let mut next_child = vec![0u64; cct.len()];
    let mut id = 0u32;
    while (id as usize) < cct.len() {
        let node = cct.node(id);
        if id != 0 {
            let p = node.parent as usize;
            start[id as usize] = start[p] + next_child[p];
        }
        let total = cct.total(id).events;
        if id != 0 {
            next_child[node.parent as usize] += total;
        }
        if id != 0 && (total as f64 * scale) < opts.min_width {
            id = cct.end(id); // skip the whole subtree
            continue;
        }
        let label = labeler.label(node.key);
        let depth = cct.depth(id);
        let x = PAD + start[id as usize] as f64 * scale;
        let width = total as f64 * scale;
        let y = height - BOTTOM - (depth + 1) * FRAME_H;
        let _ = writeln!(
            s,
            r#"<g class="f" data-s="{}" data-n="{total}" data-d="{depth}"><title>{} ({total} {}, {:.2}%)</title><rect x="{x:.2}" y="{y}" width="{width:.2}" height="{}" rx="2" fill="{}"/><text x="{:.2}" y="{}">{}</text></g>"#,
            start[id as usize],
            esc(&label),
            esc(&opts.unit),
            percent(total, all),
            FRAME_H - 1,
            color(&label, id == 0),
            x + 3.0,
            y + FRAME_H - 4,
            esc(&fit(&label, width)),
        );
        id += 1;
    }
    s.push_str("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n");
    s.push_str(SCRIPT);
    s.push_str("\n]]></script>\n</svg>\n");
    out.write_all(s.as_bytes())
}

/// The label cut to what fits in `width` pixels (about 7 per character), or nothing.
fn fit(label: &str, width: f64) -> String {
    let chars = ((width - 6.0) / 7.0).floor();
    if chars < 3.0 {
        return String::new();
    }
    let chars = chars as usize;
    if label.chars().count() <= chars {
        label.to_string()
    } else {
        let mut t: String = label.chars().take(chars - 2).collect();
        t.push_str("..");
        t
    }
}

/// A warm colour that depends only on the label, so a frame has the same colour everywhere.
fn color(label: &str, root: bool) -> String {
    if root {
        return "rgb(200,200,200)".into();
    }
    // FNV-1a: stable across runs and platforms.
    let h = label.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let r = 205 + (h % 50) as u32;
    let g = 70 + ((h >> 8) % 160) as u32;
    let b = 20 + ((h >> 16) % 50) as u32;
    format!("rgb({r},{g},{b})")
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\t' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// Zoom and search. Positions are recomputed from `data-s`/`data-n` (event units) against the
/// zoomed range, so zooming never accumulates rounding.
const SCRIPT: &str = r#"
(function () {
  var svg = document.documentElement;
  var W = parseFloat(svg.getAttribute('width')), PAD = 10;
  var total = parseFloat(svg.getAttribute('data-total')) || 1;
  var frames = Array.prototype.slice.call(document.querySelectorAll('#frames > g.f'));
  var unit = document.getElementById('frames').getAttribute('data-unit');
  var view = { s: 0, n: total, d: 0 };
  var query = null;
  function label(g) { var t = g.querySelector('title').textContent; return t.substring(0, t.lastIndexOf(' (')); }
  frames.forEach(function (g) {
    g.fl = { s: +g.getAttribute('data-s'), n: +g.getAttribute('data-n'), d: +g.getAttribute('data-d'), label: label(g) };
    var r = g.querySelector('rect'); g.fl.fill = r.getAttribute('fill');
  });
  function fit(text, w) {
    var c = Math.floor((w - 6) / 7);
    if (c < 3) return '';
    return text.length <= c ? text : text.substring(0, c - 2) + '..';
  }
  function layout() {
    var scale = (W - 2 * PAD) / view.n;
    frames.forEach(function (g) {
      var f = g.fl, r = g.querySelector('rect'), t = g.querySelector('text');
      var visible, x, w;
      if (f.d < view.d) {
        // Ancestors of the zoomed frame span the whole width.
        visible = f.s <= view.s && f.s + f.n >= view.s + view.n; x = PAD; w = W - 2 * PAD;
      } else {
        visible = f.s + f.n > view.s && f.s < view.s + view.n;
        x = PAD + (f.s - view.s) * scale; w = f.n * scale;
      }
      g.classList.toggle('hide', !visible);
      if (!visible) return;
      r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));
      t.setAttribute('x', (x + 3).toFixed(2)); t.textContent = fit(f.label, w);
    });
    document.getElementById('reset').classList.toggle('hide', view.n === total && view.d === 0);
  }
  function zoom(g) { view = { s: g.fl.s, n: g.fl.n, d: g.fl.d }; layout(); search(query); }
  function reset() { view = { s: 0, n: total, d: 0 }; layout(); search(query); }
  function search(re) {
    query = re;
    var ranges = [];
    frames.forEach(function (g) {
      var hit = re !== null && re.test(g.fl.label);
      g.querySelector('rect').setAttribute('fill', hit ? 'rgb(230,0,230)' : g.fl.fill);
      if (hit && g.fl.s + g.fl.n > view.s && g.fl.s < view.s + view.n) ranges.push([g.fl.s, g.fl.s + g.fl.n]);
    });
    // Matched share of the view: union of matched ranges (nested matches count once).
    ranges.sort(function (a, b) { return a[0] - b[0]; });
    var sum = 0, end = -1;
    ranges.forEach(function (r) {
      var a = Math.max(r[0], end, view.s), b = Math.min(r[1], view.s + view.n);
      if (b > a) sum += b - a;
      end = Math.max(end, r[1]);
    });
    document.getElementById('matched').textContent = re === null ? ' ' : 'Matched: ' + (100 * sum / view.n).toFixed(2) + '%';
    document.getElementById('search').textContent = re === null ? 'Search' : 'Clear search';
  }
  function ask() {
    if (query !== null) { search(null); return; }
    var term = prompt('Search frames (regular expression):', '');
    if (!term) return;
    try { search(new RegExp(term)); } catch (e) { alert('Not a regular expression: ' + e.message); }
  }
  frames.forEach(function (g) {
    g.addEventListener('click', function () { zoom(g); });
    g.addEventListener('mouseover', function () {
      document.getElementById('details').textContent = g.querySelector('title').textContent;
    });
  });
  document.getElementById('reset').addEventListener('click', reset);
  document.getElementById('search').addEventListener('click', ask);
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); ask(); }
    else if (e.key === 'Escape') { reset(); }
  });
  layout();
})();
"#;
