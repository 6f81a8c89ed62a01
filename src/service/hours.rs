//! `[handoff] hours`: when people answer cases, as support teams say it — `"seg-sex 08:00-18:00"` —
//! read in the policy's time zone.

use chrono::{DateTime, Datelike, Duration, NaiveTime, Utc, Weekday};
use vt_actions::vt::timezone::Timezone;

const DAYS: [(&str, Weekday); 7] = [
    ("seg", Weekday::Mon),
    ("ter", Weekday::Tue),
    ("qua", Weekday::Wed),
    ("qui", Weekday::Thu),
    ("sex", Weekday::Fri),
    ("sab", Weekday::Sat),
    ("dom", Weekday::Sun),
];

/// Days of the week (a range, Monday first) and a daily time window.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Hours {
    text: String,
    first: Weekday,
    last: Weekday,
    open: NaiveTime,
    close: NaiveTime,
}

impl TryFrom<String> for Hours {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        let bad = || "handoff.hours: esperado como seg-sex 08:00-18:00 (dias e horário)".to_owned();
        let (days, times) = text.trim().split_once(char::is_whitespace).ok_or_else(bad)?;
        let day = |d: &str| {
            let d = d.trim().to_lowercase().replace('á', "a");
            DAYS.iter().find(|(name, _)| *name == d).map(|(_, w)| *w)
        };
        let (first, last) = match days.split_once('-') {
            Some((a, b)) => (day(a).ok_or_else(bad)?, day(b).ok_or_else(bad)?),
            None => (day(days).ok_or_else(bad)?, day(days).ok_or_else(bad)?),
        };
        let (open, close) = times.trim().split_once('-').ok_or_else(bad)?;
        let time = |t: &str| NaiveTime::parse_from_str(t.trim(), "%H:%M").map_err(|_| bad());
        let (open, close) = (time(open)?, time(close)?);
        if open >= close || first.num_days_from_monday() > last.num_days_from_monday() {
            return Err(bad());
        }
        Ok(Self {
            text: text.trim().to_owned(),
            first,
            last,
            open,
            close,
        })
    }
}

impl Hours {
    fn day_is_in(&self, day: Weekday) -> bool {
        (self.first.num_days_from_monday()..=self.last.num_days_from_monday())
            .contains(&day.num_days_from_monday())
    }

    /// When people answer next, from `now`: `None` while they are answering now.
    pub(crate) fn next_opening(&self, now: DateTime<Utc>, tz: &Timezone) -> Option<DateTime<Utc>> {
        let local = tz.local(now);
        if self.day_is_in(local.weekday()) && (self.open..self.close).contains(&local.time()) {
            return None;
        }
        (0..8).find_map(|ahead| {
            let date = local.date_naive() + Duration::days(ahead);
            let opening = date.and_time(self.open);
            let later = ahead > 0 || local.time() < self.open;
            (self.day_is_in(date.weekday()) && later)
                .then(|| opening.and_local_timezone(*local.offset()).single())
                .flatten()
                .map(|t| t.with_timezone(&Utc))
        })
    }

    /// As the configuration said it.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
    }

    #[test]
    fn hours_are_read_as_support_teams_write_them_and_bad_ones_are_refused() {
        let h = Hours::try_from("seg-sex 08:00-18:00".to_owned()).expect("valid");
        let tz = Timezone::sao_paulo();
        // Monday 10:00 in São Paulo: open.
        assert_eq!(h.next_opening(at("2026-11-23T13:00:00Z"), &tz), None);
        // Sunday 09:00: Monday 08:00.
        assert_eq!(
            h.next_opening(at("2026-11-22T12:00:00Z"), &tz),
            Some(at("2026-11-23T11:00:00Z"))
        );
        // Friday 19:00: Monday 08:00.
        assert_eq!(
            h.next_opening(at("2026-11-27T22:00:00Z"), &tz),
            Some(at("2026-11-30T11:00:00Z"))
        );
        // Tuesday 07:00: the same day at 08:00.
        assert_eq!(
            h.next_opening(at("2026-11-24T10:00:00Z"), &tz),
            Some(at("2026-11-24T11:00:00Z"))
        );
        for bad in [
            "sempre",
            "seg-sex",
            "sex-seg 08:00-18:00",
            "seg-sex 18:00-08:00",
            "xyz 08:00-18:00",
        ] {
            assert!(Hours::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }
}
