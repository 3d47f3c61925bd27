//! Which slices a recording layer covers: `on`, `off`, or an inclusive window `FROM..TO`
//! (`FROM..` and `..TO` are open-ended). The same syntax serves the command-line flags and
//! the environment variables, so a layer can be switched without recompiling (model.md 3).

use std::fmt;
use std::str::FromStr;

/// The environment variable that sets the schedule-log layer when no flag does.
pub const ENV_SCHEDULE_LOG: &str = "STROBE_SCHEDULE_LOG";
/// The environment variable that sets the metrics layer when no flag does.
pub const ENV_METRICS: &str = "STROBE_METRICS";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Layer {
    #[default]
    On,
    Off,
    /// Slices `from..=to`.
    Window {
        from: u64,
        to: u64,
    },
}

impl Layer {
    /// Does the layer record slice `slice`?
    pub fn covers(self, slice: u64) -> bool {
        match self {
            Layer::On => true,
            Layer::Off => false,
            Layer::Window { from, to } => (from..=to).contains(&slice),
        }
    }

    /// The flag's value if given, else the environment variable's, else `on`.
    pub fn resolve(flag: Option<Layer>, env_var: &str) -> Result<Layer, String> {
        if let Some(l) = flag {
            return Ok(l);
        }
        match std::env::var(env_var) {
            Ok(s) if !s.trim().is_empty() => s.parse().map_err(|e| format!("{env_var}: {e}")),
            _ => Ok(Layer::On),
        }
    }
}

impl FromStr for Layer {
    type Err = String;
    fn from_str(s: &str) -> Result<Layer, String> {
        let s = s.trim();
        match s {
            "on" | "1" | "true" => return Ok(Layer::On),
            "off" | "0" | "false" => return Ok(Layer::Off),
            _ => {}
        }
        let bad = || {
            format!("{s:?} is not on, off or a slice window FROM..TO (e.g. 100..200, 100.., ..50)")
        };
        let (a, b) = s.split_once("..").ok_or_else(bad)?;
        let num = |t: &str, dflt: u64| -> Result<u64, String> {
            let t = t.trim();
            if t.is_empty() {
                Ok(dflt)
            } else {
                t.parse().map_err(|_| bad())
            }
        };
        let (from, to) = (num(a, 0)?, num(b, u64::MAX)?);
        if from > to {
            return Err(format!("{s:?}: the window is empty (FROM > TO)"));
        }
        Ok(Layer::Window { from, to })
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layer::On => f.write_str("on"),
            Layer::Off => f.write_str("off"),
            Layer::Window { from, to } if *to == u64::MAX => write!(f, "{from}.."),
            Layer::Window { from, to } => write!(f, "{from}..{to}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_cover() {
        assert_eq!("on".parse::<Layer>().unwrap(), Layer::On);
        assert_eq!("off".parse::<Layer>().unwrap(), Layer::Off);
        let w: Layer = "10..20".parse().unwrap();
        assert!(!w.covers(9) && w.covers(10) && w.covers(20) && !w.covers(21));
        let open: Layer = "5..".parse().unwrap();
        assert!(open.covers(u64::MAX) && !open.covers(4));
        assert_eq!(open.to_string(), "5..");
        let upto: Layer = "..3".parse().unwrap();
        assert!(upto.covers(0) && upto.covers(3) && !upto.covers(4));
        assert_eq!(w.to_string(), "10..20");
        for bad in ["maybe", "3..1", "a..b", "1-2"] {
            assert!(bad.parse::<Layer>().is_err(), "{bad}");
        }
    }
}
