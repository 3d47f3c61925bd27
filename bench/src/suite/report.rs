//! Statistics over samples and the Markdown the suite writes.

use std::fmt::Write as _;

/// Median, min and max of a sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }

    /// Half the range relative to the median, in percent: how much the runs disagreed.
    pub fn spread_pct(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.max - self.min) / 2.0 / self.median.abs() * 100.0
        }
    }
}

/// "12.3 ±4%" (or "—" when there is no sample).
pub fn cell(s: Option<Summary>) -> String {
    match s {
        None => "—".into(),
        Some(s) => format!("{} ±{:.0}%", num(s.median), s.spread_pct()),
    }
}

/// A number with a sensible number of digits for a table.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `a / b` of two medians, as "1.23x".
pub fn ratio(a: Option<Summary>, b: Option<Summary>) -> String {
    match ratio_value(a, b) {
        Some(r) => format!("{r:.2}x"),
        None => "—".into(),
    }
}

pub fn ratio_value(a: Option<Summary>, b: Option<Summary>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b.median != 0.0 => Some(a.median / b.median),
        _ => None,
    }
}

/// A Markdown table being built.
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "| {} |", self.header.join(" | "));
        let _ = writeln!(
            s,
            "|{}|",
            self.header
                .iter()
                .map(|_| "---")
                .collect::<Vec<_>>()
                .join("|")
        );
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        s
    }
}

/// A target from the issue and what was measured against it.
pub struct Target {
    pub what: String,
    pub goal: String,
    pub measured: String,
    /// `None` when it could not be measured.
    pub met: Option<bool>,
}

pub fn targets_table(targets: &[Target]) -> String {
    let mut t = Table::new(&["target", "goal", "measured", "verdict"]);
    for x in targets {
        t.row(vec![
            x.what.clone(),
            x.goal.clone(),
            x.measured.clone(),
            match x.met {
                Some(true) => "met".into(),
                Some(false) => "**missed**".into(),
                None => "not measured".into(),
            },
        ]);
    }
    t.render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_ratios() {
        let s = Summary::of(&[3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(s.spread_pct(), 50.0);
        let e = Summary::of(&[4.0, 2.0]).unwrap();
        assert_eq!(e.median, 3.0);
        assert_eq!(ratio(Some(s), Some(e)), "0.67x");
        assert_eq!(ratio(None, Some(e)), "—");
        assert!(Summary::of(&[]).is_none());
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "2".into()]);
        assert_eq!(t.render(), "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }
}
