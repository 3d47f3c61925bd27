//! What `/` understands: a slice number, `rank N`, a call name, `rank=N call=NAME` (both:
//! the next slice where that rank is in that call) and `ranks=SET` (show only those ranks
//! in the Timeline and the History's rank cycle; `ranks=all` shows every rank again).

use std::collections::BTreeSet;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    Slice(u64),
    Rank(u32),
    Call(String),
    /// The next slice where `rank` is blocked in, or posts, `call`.
    RankCall {
        rank: u32,
        call: String,
    },
    /// Show only these ranks (`None`: all).
    Filter(Option<BTreeSet<u32>>),
}

/// A rank set: `0,2,5-7`; `all` (or empty) is `None`.
pub fn parse_ranks(text: &str) -> Result<Option<BTreeSet<u32>>, String> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let mut set = BTreeSet::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("not a rank set: {part:?} (ranks=0,2,5-7 or ranks=all)");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a > 1_000_000 {
                    return Err(bad());
                }
                set.extend(a..=b);
            }
            None => {
                set.insert(part.parse().map_err(|_| bad())?);
            }
        }
    }
    Ok(Some(set))
}

/// Parse what was typed after `/`.
pub fn parse(text: &str) -> Result<Query, String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    if let Ok(s) = t.parse::<u64>() {
        return Ok(Query::Slice(s));
    }
    if t.contains('=') {
        let (mut rank, mut call, mut ranks) = (None, None, None);
        for word in t.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                return Err(format!(
                    "{word:?}: write key=value (rank=2 call=MPI_Recv, ranks=0-3)"
                ));
            };
            match k.to_ascii_lowercase().as_str() {
                "rank" | "r" => {
                    rank = Some(
                        v.parse::<u32>()
                            .map_err(|_| format!("rank={v}: not a rank number"))?,
                    )
                }
                "call" | "c" => call = Some(v.to_string()),
                "ranks" | "only" => ranks = Some(parse_ranks(v)?),
                other => {
                    return Err(format!(
                        "unknown search key {other:?}: rank=, call=, ranks="
                    ))
                }
            }
        }
        return Ok(match (rank, call, ranks) {
            (_, _, Some(set)) => Query::Filter(set),
            (Some(rank), Some(call), None) => Query::RankCall { rank, call },
            (Some(rank), None, None) => Query::Rank(rank),
            (None, Some(call), None) => Query::Call(call),
            (None, None, None) => return Err("an empty search".into()),
        });
    }
    if let Some(r) = lower
        .strip_prefix("rank")
        .or_else(|| lower.strip_prefix('r'))
        .and_then(|r| r.trim().parse::<u32>().ok())
    {
        return Ok(Query::Rank(r));
    }
    Ok(Query::Call(t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        assert_eq!(parse("53"), Ok(Query::Slice(53)));
        assert_eq!(parse("rank 2"), Ok(Query::Rank(2)));
        assert_eq!(parse("r3"), Ok(Query::Rank(3)));
        assert_eq!(parse("Barrier"), Ok(Query::Call("Barrier".into())));
        assert_eq!(
            parse("rank=2 call=MPI_Recv"),
            Ok(Query::RankCall {
                rank: 2,
                call: "MPI_Recv".into()
            })
        );
        assert_eq!(
            parse("call=Recv rank=1"),
            Ok(Query::RankCall {
                rank: 1,
                call: "Recv".into()
            })
        );
        assert_eq!(
            parse("ranks=0,2-3"),
            Ok(Query::Filter(Some([0, 2, 3].into_iter().collect())))
        );
        assert_eq!(parse("ranks=all"), Ok(Query::Filter(None)));
        assert!(parse("rank=x call=Recv").is_err());
        assert!(parse("colour=red").is_err());
        assert!(parse("ranks=3-1").is_err());
    }
}
