//! Version constraints as Crossplane reads them (Masterminds/semver): comparisons joined by `,` or spaces, `||`
//! between alternatives, `~` and `^` ranges, `x`/`*` wildcards, an optional `v` and pre-release on versions.
//!
//! Each alternative is reduced to a half-open interval of release versions, which is all the checks need: does a
//! vendored release fall inside, is the interval empty, does it reach past the next major.

use std::fmt;

/// A release version, pre-release and build metadata dropped (`v2.3.0-0` is 2.3.0: as a lower bound it admits
/// 2.3.0 and its pre-releases, as an upper bound it excludes them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u64, pub u64, pub u64);

impl Version {
    pub fn next_major(self) -> Self {
        Self(self.0 + 1, 0, 0)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        match Partial::parse(text)? {
            Partial {
                parts,
                wildcard: false,
            } if parts.len() == 3 => Ok(Self(parts[0], parts[1], parts[2])),
            _ => Err(format!("{text:?} is not a full version (major.minor.patch)")),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Versions from `lower` (inclusive) to `upper` (exclusive; None: no end), minus `excluded` (`!=` terms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub lower: Version,
    pub upper: Option<Version>,
    pub excluded: Vec<Version>,
}

impl Range {
    fn everything() -> Self {
        Self {
            lower: Version(0, 0, 0),
            upper: None,
            excluded: Vec::new(),
        }
    }

    pub fn contains(&self, v: Version) -> bool {
        self.lower <= v && self.upper.is_none_or(|upper| v < upper) && !self.excluded.contains(&v)
    }

    pub fn is_empty(&self) -> bool {
        self.upper.is_some_and(|upper| upper <= self.lower)
    }

    fn narrow(&mut self, lower: Version, upper: Option<Version>) {
        self.lower = self.lower.max(lower);
        self.upper = match (self.upper, upper) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// A parsed constraint: any of its alternatives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub alternatives: Vec<Range>,
}

impl Constraint {
    pub fn parse(text: &str) -> Result<Self, String> {
        // An operator may be separated from its version by spaces (`>= 1.2.3`).
        let mut joined = String::new();
        for c in text.chars() {
            if !(c == ' ' && joined.ends_with(['>', '<', '=', '~', '^', '!'])) {
                joined.push(c);
            }
        }
        if joined.trim().is_empty() {
            return Err("an empty constraint".into());
        }
        let alternatives = joined
            .split("||")
            .map(|alternative| {
                let terms: Vec<&str> = alternative.split([',', ' ']).filter(|t| !t.is_empty()).collect();
                if terms.is_empty() {
                    return Err(format!("{text:?} has an empty alternative"));
                }
                let mut range = Range::everything();
                for term in terms {
                    apply(&mut range, term).map_err(|e| format!("{text:?}: {e}"))?;
                }
                Ok(range)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self { alternatives })
    }

    pub fn matches(&self, v: Version) -> bool {
        self.alternatives.iter().any(|r| r.contains(v))
    }

    pub fn is_satisfiable(&self) -> bool {
        self.alternatives.iter().any(|r| !r.is_empty())
    }

    /// The oldest version any alternative admits.
    pub fn lower_bound(&self) -> Option<Version> {
        self.alternatives
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.lower)
            .min()
    }

    /// Why the constraint admits more than one major version (or every future one), if it does.
    pub fn too_wide(&self) -> Option<String> {
        self.alternatives
            .iter()
            .filter(|r| !r.is_empty())
            .find_map(|r| match r.upper {
                None => Some(format!(
                    "has no upper bound: it accepts every future major release (cap it below {})",
                    r.lower.next_major()
                )),
                Some(upper) if upper > r.lower.next_major() => Some(format!(
                    "reaches {upper}: it accepts more than one major release (cap it below {})",
                    r.lower.next_major()
                )),
                Some(_) => None,
            })
    }
}

/// A version with possibly fewer than three parts or a wildcard (`1.2`, `1.x`, `*`).
struct Partial {
    parts: Vec<u64>,
    wildcard: bool,
}

impl Partial {
    fn parse(text: &str) -> Result<Self, String> {
        let bare = text.strip_prefix('v').unwrap_or(text);
        let core = bare.split(['-', '+']).next().unwrap_or_default();
        let mut parts = Vec::new();
        let mut wildcard = false;
        let pieces: Vec<&str> = core.split('.').collect();
        if pieces.len() > 3 {
            return Err(format!("{text:?} has more than three version parts"));
        }
        for piece in pieces {
            match piece {
                "x" | "X" | "*" => wildcard = true,
                _ if wildcard => return Err(format!("{text:?}: a number after a wildcard")),
                _ => parts.push(
                    piece
                        .parse()
                        .ok()
                        .filter(|_| piece.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| format!("{text:?} is not a version"))?,
                ),
            }
        }
        if parts.is_empty() && !wildcard {
            return Err(format!("{text:?} is not a version"));
        }
        Ok(Self {
            wildcard: wildcard || parts.len() < 3,
            parts,
        })
    }

    fn floor(&self) -> Version {
        let at = |i: usize| self.parts.get(i).copied().unwrap_or(0);
        Version(at(0), at(1), at(2))
    }

    /// The first version past everything this partial version names (`1.2` → 1.3.0, `1.2.3` → 1.2.4).
    fn ceiling(&self) -> Option<Version> {
        let v = self.floor();
        match self.parts.len() {
            0 => None,
            1 => Some(Version(v.0 + 1, 0, 0)),
            2 => Some(Version(v.0, v.1 + 1, 0)),
            _ => Some(Version(v.0, v.1, v.2 + 1)),
        }
    }
}

fn apply(range: &mut Range, term: &str) -> Result<(), String> {
    let split = term
        .find(|c: char| c.is_ascii_alphanumeric() || c == '*')
        .ok_or_else(|| format!("{term:?} has no version"))?;
    let (op, version) = term.split_at(split);
    let v = Partial::parse(version)?;
    let (floor, ceiling) = (v.floor(), v.ceiling());
    match op {
        "" | "=" => range.narrow(floor, ceiling),
        "!=" if !v.wildcard => range.excluded.push(floor),
        ">=" | "=>" => range.narrow(floor, None),
        ">" => range.narrow(
            if v.wildcard {
                ceiling.unwrap_or(floor)
            } else {
                Version(floor.0, floor.1, floor.2 + 1)
            },
            None,
        ),
        "<" => range.narrow(Version(0, 0, 0), Some(floor)),
        "<=" | "=<" => range.narrow(Version(0, 0, 0), ceiling),
        "~" | "~>" => {
            let upper = if v.parts.len() <= 1 {
                Version(floor.0 + 1, 0, 0)
            } else {
                Version(floor.0, floor.1 + 1, 0)
            };
            range.narrow(floor, Some(upper));
        }
        "^" => {
            let upper = match (floor, v.parts.len()) {
                (Version(0, 0, _), 3) => Version(0, 0, floor.2 + 1),
                (Version(0, minor, _), n) if n >= 2 => Version(0, minor + 1, 0),
                _ => Version(floor.0 + 1, 0, 0),
            };
            range.narrow(floor, Some(upper));
        }
        _ => return Err(format!("{term:?}: unknown operator {op:?}")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> (Version, Option<Version>) {
        let c = Constraint::parse(text).unwrap();
        (c.alternatives[0].lower, c.alternatives[0].upper)
    }

    #[test]
    fn ranges_follow_the_masterminds_operators() {
        assert_eq!(
            range(">=v2.3.0-0, <v3.0.0-0"),
            (Version(2, 3, 0), Some(Version(3, 0, 0)))
        );
        assert_eq!(range(">= 1.0.2 < 2"), (Version(1, 0, 2), Some(Version(2, 0, 0))));
        assert_eq!(range("~1.2.3"), (Version(1, 2, 3), Some(Version(1, 3, 0))));
        assert_eq!(range("^1.2"), (Version(1, 2, 0), Some(Version(2, 0, 0))));
        assert_eq!(range("^0.2.3"), (Version(0, 2, 3), Some(Version(0, 3, 0))));
        assert_eq!(range("v0.5.x"), (Version(0, 5, 0), Some(Version(0, 6, 0))));
        assert_eq!(range("1.2.3"), (Version(1, 2, 3), Some(Version(1, 2, 4))));
        assert_eq!(range("<=1.4"), (Version(0, 0, 0), Some(Version(1, 5, 0))));
        assert_eq!(range(">1.2.3"), (Version(1, 2, 4), None));
    }

    #[test]
    fn matching_takes_any_alternative_and_honours_exclusions() {
        let c = Constraint::parse("^1.0.0 || >=2.1, <3, !=2.2.0").unwrap();
        assert!(c.matches(Version(1, 9, 9)));
        assert!(!c.matches(Version(2, 0, 0)));
        assert!(c.matches(Version(2, 1, 0)));
        assert!(!c.matches(Version(2, 2, 0)));
        assert_eq!(c.lower_bound(), Some(Version(1, 0, 0)));
    }

    #[test]
    fn empty_and_too_wide_ranges_are_told_apart() {
        assert!(!Constraint::parse(">=2.0.0, <1.0.0").unwrap().is_satisfiable());
        assert!(
            Constraint::parse(">=v1.0.0")
                .unwrap()
                .too_wide()
                .unwrap()
                .contains("no upper bound")
        );
        assert!(
            Constraint::parse(">=1.0.0 <3.0.0")
                .unwrap()
                .too_wide()
                .unwrap()
                .contains("more than one major")
        );
        assert_eq!(Constraint::parse(">=1.0.2 <2.0.0").unwrap().too_wide(), None);
    }

    #[test]
    fn garbage_is_rejected() {
        for bad in ["", "latest", ">=v2.a", "1.2.3.4", "??1.0", "1.x.3"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }
}
