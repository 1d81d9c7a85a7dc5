//! Horizontal bar charts as self-contained SVG text: one bar per pair, its value printed at the
//! end of the bar, and an optional dashed reference line (the floor, or 1× for ratios).

use std::fmt::Write;

/// One bar: its label, its value, and whether it is purra's (drawn in the accent colour).
#[derive(Debug, Clone)]
pub struct Bar {
    /// Shown left of the bar.
    pub label: String,
    /// The bar's length; `None` for a failed measurement, drawn as FAILED with no bar (never
    /// as zero).
    pub value: Option<f64>,
    /// Drawn in the accent colour.
    pub accent: bool,
}

/// A chart: a title, a unit for the value labels, the bars, and an optional reference line.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The heading above the bars.
    pub title: String,
    /// Appended to each value label (e.g. `calls/s`, `×`).
    pub unit: String,
    /// Top to bottom.
    pub bars: Vec<Bar>,
    /// A dashed vertical line at this value, with its label.
    pub reference: Option<(String, f64)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A value as people read it: thousands separated by a thin space above 1000, two decimals below 10.
pub fn human(v: f64) -> String {
    if v.abs() >= 1000.0 {
        let s = format!("{}", v.round() as i64);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 && c != '-' {
                out.push('\u{2009}');
            }
            out.push(c);
        }
        out
    } else if v.abs() >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

impl Chart {
    /// The SVG document.
    pub fn render(&self) -> String {
        let label_w = 330.0;
        let bar_w = 430.0;
        let row = 22.0;
        let top = 36.0;
        let width = label_w + bar_w + 110.0;
        let height = top + row * self.bars.len() as f64 + 30.0;
        let max = self
            .bars
            .iter()
            .filter_map(|b| b.value)
            .chain(self.reference.iter().map(|r| r.1))
            .fold(0.0f64, f64::max)
            .max(f64::MIN_POSITIVE);
        let x = |v: f64| label_w + bar_w * v / max;
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#ffffff"/>
<text x="10" y="22" font-size="15" font-weight="bold">{}</text>
"##,
            escape(&self.title)
        );
        for (i, b) in self.bars.iter().enumerate() {
            let y = top + row * i as f64;
            let fill = if b.accent { "#d9480f" } else { "#868e96" };
            let Some(value) = b.value else {
                let _ = writeln!(
                    s,
                    r##"<text x="{}" y="{}" text-anchor="end">{}</text><text x="{label_w}" y="{}" fill="#c92a2a" font-weight="bold">FAILED</text>"##,
                    label_w - 8.0,
                    y + 15.0,
                    escape(&b.label),
                    y + 15.0,
                );
                continue;
            };
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{label_w}" y="{}" width="{:.1}" height="{}" fill="{fill}"/><text x="{:.1}" y="{}">{} {}</text>"##,
                label_w - 8.0,
                y + 15.0,
                escape(&b.label),
                y + 3.0,
                (x(value) - label_w).max(0.5),
                row - 6.0,
                x(value) + 5.0,
                y + 15.0,
                human(value),
                escape(&self.unit)
            );
        }
        if let Some((label, v)) = &self.reference {
            let bottom = top + row * self.bars.len() as f64;
            let _ = writeln!(
                s,
                r##"<line x1="{0:.1}" y1="{1}" x2="{0:.1}" y2="{2}" stroke="#1864ab" stroke-dasharray="4 3"/><text x="{0:.1}" y="{3}" fill="#1864ab" text-anchor="middle">{4}</text>"##,
                x(*v),
                top - 4.0,
                bottom + 2.0,
                bottom + 16.0,
                escape(label)
            );
        }
        s.push_str("</svg>\n");
        s
    }
}
