//! Measurements kept per round, and ratios paired round by round.
//!
//! A ratio of two medians taken over all rounds can mislead: pipe round trips switch between two
//! speed modes from round to round, and the medians of two unpaired rows can fall in different
//! modes (a sequential ratio once printed 2.13× while, round by round, it was 0.43–1.01×). So a
//! ratio here is computed in each round from the two values measured in that round, and reported
//! as the median over rounds with the lowest and highest; a target is judged on that median.

use std::collections::BTreeMap;

use crate::median;

/// A value per round: its median, lowest and highest, and how many rounds gave it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median over rounds.
    pub median: f64,
    /// The lowest round.
    pub min: f64,
    /// The highest round.
    pub max: f64,
    /// How many rounds.
    pub rounds: usize,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        Some(Spread {
            median: median(values),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            rounds: values.len(),
        })
    }

    /// `0.71× (0.43–1.01×)`: the median and, over more than one round, the range.
    pub fn ratio_text(&self) -> String {
        if self.rounds > 1 {
            format!("{:.2}× ({:.2}–{:.2}×)", self.median, self.min, self.max)
        } else {
            format!("{:.2}×", self.median)
        }
    }
}

/// Every measurement of a run: a value (or a failure, `None`) per key and round.
#[derive(Debug, Clone, Default)]
pub struct Rounds {
    round: usize,
    values: BTreeMap<String, BTreeMap<usize, Option<f64>>>,
}

impl Rounds {
    /// Starts round `round`: what is recorded from now on belongs to it.
    pub fn start(&mut self, round: usize) {
        self.round = round;
    }

    /// Records `v` (or a failure, `None`) for `key` in the current round; a second value for the
    /// same key and round replaces the first.
    pub fn record(&mut self, key: &str, v: Option<f64>) {
        self.values
            .entry(key.to_owned())
            .or_default()
            .insert(self.round, v);
    }

    /// The values of `key` by round.
    pub fn of(&self, key: &str) -> Option<&BTreeMap<usize, Option<f64>>> {
        self.values.get(key)
    }

    /// Every key with its values by round.
    pub fn all(&self) -> &BTreeMap<String, BTreeMap<usize, Option<f64>>> {
        &self.values
    }

    /// The spread of `key` over rounds; `None` when any round failed or none ran.
    pub fn spread(&self, key: &str) -> Option<Spread> {
        self.combine(&[key], |v| v[0])
    }

    /// `a ÷ b` computed in each round from the values of that round, over the rounds that
    /// measured both; `None` when either failed in any round or no round measured both (a failed
    /// pair is never read as a number).
    pub fn paired(&self, a: &str, b: &str) -> Option<Spread> {
        self.combine(&[a, b], |v| v[0] / v[1])
    }

    /// `f` of the values of `keys` in each round that measured them all; `None` when any of them
    /// failed in any round, or no round measured them all.
    pub fn combine(&self, keys: &[&str], f: impl Fn(&[f64]) -> f64) -> Option<Spread> {
        let series: Vec<&BTreeMap<usize, Option<f64>>> = keys
            .iter()
            .map(|k| self.values.get(*k))
            .collect::<Option<_>>()?;
        if series.iter().any(|s| s.values().any(Option::is_none)) {
            return None;
        }
        let first = series.first()?;
        let per_round: Vec<f64> = first
            .keys()
            .filter_map(|round| {
                let v: Vec<f64> = series
                    .iter()
                    .map(|s| s.get(round).copied().flatten())
                    .collect::<Option<_>>()?;
                Some(f(&v))
            })
            .collect();
        Spread::of(&per_round)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[(&str, &[Option<f64>])]) -> Rounds {
        let mut r = Rounds::default();
        let n = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
        for round in 0..n {
            r.start(round);
            for (k, v) in rows {
                if let Some(x) = v.get(round) {
                    r.record(k, *x);
                }
            }
        }
        r
    }

    #[test]
    fn a_ratio_is_paired_round_by_round_not_taken_between_medians() {
        // Two speed modes: each round's pair falls in the same mode, the medians do not.
        let r = run(&[
            ("a", &[Some(100.0), Some(10.0), Some(12.0)]),
            ("b", &[Some(200.0), Some(20.0), Some(12.0)]),
        ]);
        // Medians: a 12, b 20 → 0.6×; paired: 0.5, 0.5, 1.0 → median 0.5.
        let p = r.paired("a", "b").unwrap();
        assert_eq!(
            p,
            Spread {
                median: 0.5,
                min: 0.5,
                max: 1.0,
                rounds: 3
            }
        );
        assert_eq!(p.ratio_text(), "0.50× (0.50–1.00×)");
    }

    #[test]
    fn a_failed_round_fails_the_pair_and_unmatched_rounds_are_left_out() {
        let r = run(&[
            ("a", &[Some(1.0), None]),
            ("b", &[Some(2.0), Some(2.0)]),
            ("c", &[Some(4.0)]),
        ]);
        assert_eq!(r.paired("a", "b"), None);
        assert_eq!(r.paired("b", "a"), None);
        assert_eq!(r.paired("b", "missing"), None);
        let bc = r.paired("b", "c").unwrap();
        assert_eq!((bc.median, bc.rounds), (0.5, 1));
        assert_eq!(bc.ratio_text(), "0.50×");
        let diff = r.combine(&["c", "b"], |v| v[0] - v[1]).unwrap();
        assert_eq!(diff.median, 2.0);
        assert_eq!(r.spread("b").unwrap().median, 2.0);
    }
}
