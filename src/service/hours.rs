//! When people answer cases, as support teams write it: `"seg-sex 08:00-18:00"`, or with split
//! shifts and a Saturday morning, `"seg-sex 08:00-12:00,13:00-18:00; sab 08:00-12:00"` — local times
//! of the policy's (or the team's) time zone. Holidays and business-time arithmetic are
//! [`super::calendar`]'s.

use chrono::{NaiveTime, Weekday};

const DAYS: [(&str, Weekday); 7] = [
    ("seg", Weekday::Mon),
    ("ter", Weekday::Tue),
    ("qua", Weekday::Wed),
    ("qui", Weekday::Thu),
    ("sex", Weekday::Fri),
    ("sab", Weekday::Sat),
    ("dom", Weekday::Sun),
];

const EXPECTED: &str = "esperado como seg-sex 08:00-12:00,13:00-18:00; sab 08:00-12:00 (dias e horários)";

/// A week of shifts: for each day (Monday first), its opening and closing times, in order and apart.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Hours {
    week: [Vec<(NaiveTime, NaiveTime)>; 7],
}

fn day(name: &str) -> Option<Weekday> {
    let name = name.trim().to_lowercase().replace('á', "a");
    DAYS.iter().find(|(d, _)| *d == name).map(|(_, w)| *w)
}

/// `seg-sex`, `sab` or `seg,qua,sex`: the days a segment names.
fn days(text: &str) -> Option<Vec<Weekday>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day(a)?.num_days_from_monday(), day(b)?.num_days_from_monday());
                if a > b {
                    return None;
                }
                out.extend((a..=b).map(|d| DAYS[d as usize].1));
            }
            None => out.push(day(part)?),
        }
    }
    Some(out)
}

/// `08:00-12:00,13:00-18:00`: a day's shifts.
fn shifts(text: &str) -> Option<Vec<(NaiveTime, NaiveTime)>> {
    text.split(',')
        .map(|w| {
            let (open, close) = w.trim().split_once('-')?;
            let time = |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").ok();
            let (open, close) = (time(open)?, time(close)?);
            (open < close).then_some((open, close))
        })
        .collect()
}

impl TryFrom<String> for Hours {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let bad = || EXPECTED.to_owned();
        let mut week: [Vec<(NaiveTime, NaiveTime)>; 7] = Default::default();
        for segment in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (names, times) = segment.split_once(char::is_whitespace).ok_or_else(bad)?;
            let (names, times) = (days(names).ok_or_else(bad)?, shifts(times).ok_or_else(bad)?);
            for d in names {
                week[d.num_days_from_monday() as usize].extend(times.iter().copied());
            }
        }
        for shifts in &mut week {
            shifts.sort();
            if shifts.windows(2).any(|w| w[0].1 > w[1].0) {
                return Err(format!("{EXPECTED}: turnos do mesmo dia se sobrepõem"));
            }
        }
        if week.iter().all(Vec::is_empty) {
            return Err(bad());
        }
        Ok(Self { week })
    }
}

impl Hours {
    /// The day's shifts, in order.
    pub(crate) fn shifts(&self, day: Weekday) -> &[(NaiveTime, NaiveTime)] {
        &self.week[day.num_days_from_monday() as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> NaiveTime {
        NaiveTime::parse_from_str(s, "%H:%M").expect("time")
    }

    #[test]
    fn hours_are_read_as_support_teams_write_them_and_bad_ones_are_refused() {
        let h = Hours::try_from("seg-sex 08:00-18:00".to_owned()).expect("valid");
        assert_eq!(h.shifts(Weekday::Wed), [(t("08:00"), t("18:00"))]);
        assert!(h.shifts(Weekday::Sat).is_empty());
        let split =
            Hours::try_from("seg-sex 13:00-18:00,08:00-12:00; sab 08:00-12:00".to_owned()).expect("split");
        assert_eq!(
            split.shifts(Weekday::Fri),
            [(t("08:00"), t("12:00")), (t("13:00"), t("18:00"))]
        );
        assert_eq!(split.shifts(Weekday::Sat), [(t("08:00"), t("12:00"))]);
        assert!(split.shifts(Weekday::Sun).is_empty());
        let listed = Hours::try_from("seg,qua 09:00-10:00".to_owned()).expect("listed");
        assert!(listed.shifts(Weekday::Tue).is_empty() && !listed.shifts(Weekday::Wed).is_empty());
        for bad in [
            "sempre",
            "seg-sex",
            "sex-seg 08:00-18:00",
            "seg-sex 18:00-08:00",
            "xyz 08:00-18:00",
            "seg 08:00-12:00,11:00-13:00",
            "",
        ] {
            assert!(Hours::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }
}
