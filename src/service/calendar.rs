//! Business time: a team's [`Hours`] less Brazil's national holidays (the fixed ones, and Carnival,
//! Good Friday and Corpus Christi from Easter) and the operator's own (`feriados`), in a time zone.
//! SLA clocks count in it ([`Calendar::add`], [`Calendar::minutes_between`]), and a card holder who
//! writes outside it is told when a person answers ([`Calendar::when_said`]).

use std::collections::BTreeSet;

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc, Weekday};
use vt_domain::vt::timezone::Timezone;

use super::Hours;

/// How far ahead an opening is looked for: a year of holidays cannot close a desk longer.
const HORIZON_DAYS: i64 = 400;

/// When a desk answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Calendar {
    /// `None`: always (no hours configured).
    hours: Option<Hours>,
    /// The operator's state and municipal holidays; the national ones are computed.
    extra_holidays: BTreeSet<NaiveDate>,
    tz: Timezone,
}

/// Easter Sunday of `year` (the anonymous Gregorian algorithm).
pub(crate) fn easter(year: i32) -> NaiveDate {
    let a = year % 19;
    let b = year / 100;
    let c = year % 100;
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    NaiveDate::from_ymd_opt(year, month as u32, day as u32).unwrap_or_default()
}

/// Whether `date` is a national holiday in Brazil (Carnival counted: desks close on it).
pub(crate) fn national_holiday(date: NaiveDate) -> bool {
    const FIXED: [(u32, u32); 9] = [
        (1, 1),   // Confraternização Universal
        (4, 21),  // Tiradentes
        (5, 1),   // Dia do Trabalho
        (9, 7),   // Independência
        (10, 12), // Nossa Senhora Aparecida
        (11, 2),  // Finados
        (11, 15), // Proclamação da República
        (11, 20), // Consciência Negra (Lei 14.759/2023, from 2024)
        (12, 25), // Natal
    ];
    let (m, d) = (date.month(), date.day());
    if FIXED.contains(&(m, d)) && ((m, d) != (11, 20) || date.year() >= 2024) {
        return true;
    }
    let from_easter = (date - easter(date.year())).num_days();
    // Carnival Monday and Tuesday, Good Friday, Corpus Christi.
    matches!(from_easter, -48 | -47 | -2 | 60)
}

impl Calendar {
    pub fn new(
        hours: Option<Hours>,
        extra_holidays: impl IntoIterator<Item = NaiveDate>,
        tz: Timezone,
    ) -> Self {
        Self {
            hours,
            extra_holidays: extra_holidays.into_iter().collect(),
            tz,
        }
    }

    /// Always open, in São Paulo's zone.
    pub fn always() -> Self {
        Self::new(None, [], Timezone::sao_paulo())
    }

    /// Whether the desk is closed all of `date` (a holiday).
    pub(crate) fn holiday(&self, date: NaiveDate) -> bool {
        national_holiday(date) || self.extra_holidays.contains(&date)
    }

    /// The open intervals of one local day, as instants.
    fn day_intervals(&self, date: NaiveDate) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let Some(hours) = &self.hours else {
            let next = date + Duration::days(1);
            return vec![(
                self.tz.instant(date.and_time(NaiveTime::MIN)),
                self.tz.instant(next.and_time(NaiveTime::MIN)),
            )];
        };
        if self.holiday(date) {
            return Vec::new();
        }
        hours
            .shifts(date.weekday())
            .iter()
            .map(|(open, close)| {
                (
                    self.tz.instant(date.and_time(*open)),
                    self.tz.instant(date.and_time(*close)),
                )
            })
            .collect()
    }

    /// Open intervals from the local day of `from` on, each cut to start no earlier than `from`.
    fn intervals_from(
        &self,
        from: DateTime<Utc>,
    ) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + '_ {
        let first = self.tz.local(from).date_naive();
        (0..HORIZON_DAYS)
            .flat_map(move |ahead| self.day_intervals(first + Duration::days(ahead)))
            .filter(move |(_, close)| *close > from)
            .map(move |(open, close)| (open.max(from), close))
    }

    /// When the desk opens next, from `now`: `None` while it is open.
    pub(crate) fn next_opening(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let (open, _) = self.intervals_from(now).next()?;
        (open > now).then_some(open)
    }

    /// `minutes` of business time after `start`.
    pub(crate) fn add(&self, start: DateTime<Utc>, minutes: i64) -> DateTime<Utc> {
        let mut left = Duration::minutes(minutes.max(0));
        let mut last = start;
        for (open, close) in self.intervals_from(start) {
            if close - open >= left {
                return open + left;
            }
            left -= close - open;
            last = close;
        }
        last + left
    }

    /// Business minutes between `from` and `to` (zero when `to` is not later).
    pub(crate) fn minutes_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        let mut total = Duration::zero();
        for (open, close) in self.intervals_from(from) {
            if open >= to {
                break;
            }
            total += close.min(to) - open;
        }
        total.num_seconds() as f64 / 60.0
    }

    /// When `at` is, as a card holder reads it from `now`: "hoje às 13:00", "amanhã às 08:00", "na
    /// segunda-feira às 08:00", beyond a week "em 10/02 às 08:00".
    pub(crate) fn when_said(&self, now: DateTime<Utc>, at: DateTime<Utc>) -> String {
        let (today, local) = (self.tz.local(now).date_naive(), self.tz.local(at));
        let time = local.format("%H:%M");
        let days = (local.date_naive() - today).num_days();
        match days {
            0 => format!("hoje às {time}"),
            1 => format!("amanhã às {time}"),
            2..=6 => {
                let day = match local.weekday() {
                    Weekday::Mon => "na segunda-feira",
                    Weekday::Tue => "na terça-feira",
                    Weekday::Wed => "na quarta-feira",
                    Weekday::Thu => "na quinta-feira",
                    Weekday::Fri => "na sexta-feira",
                    Weekday::Sat => "no sábado",
                    Weekday::Sun => "no domingo",
                };
                format!("{day} às {time}")
            }
            _ => format!("em {} às {time}", local.format("%d/%m")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).expect("time").with_timezone(&Utc)
    }

    fn desk(hours: &str) -> Calendar {
        Calendar::new(
            Some(Hours::try_from(hours.to_owned()).expect("hours")),
            [],
            Timezone::sao_paulo(),
        )
    }

    fn date(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("date")
    }

    #[test]
    fn easter_and_the_holidays_it_moves_are_brazils() {
        assert_eq!(easter(2026), date("2026-04-05"));
        assert_eq!(easter(2027), date("2027-03-28"));
        assert_eq!(easter(2024), date("2024-03-31"));
        for holiday in [
            "2026-02-16", // Carnival Monday
            "2026-02-17", // Carnival Tuesday
            "2026-04-03", // Good Friday
            "2026-06-04", // Corpus Christi
            "2027-02-09", // Carnival Tuesday
            "2026-01-01",
            "2026-04-21",
            "2026-09-07",
            "2026-11-20",
            "2026-12-25",
        ] {
            assert!(national_holiday(date(holiday)), "{holiday}");
        }
        for workday in ["2026-02-18", "2026-04-06", "2023-11-20", "2026-11-27"] {
            assert!(!national_holiday(date(workday)), "{workday}");
        }
    }

    #[test]
    fn thirty_business_minutes_from_friday_1755_are_monday_0825_and_skip_carnival() {
        let c = desk("seg-sex 08:00-18:00");
        // Friday 2026-11-27 17:55 in São Paulo (UTC-3).
        assert_eq!(c.add(at("2026-11-27T20:55:00Z"), 30), at("2026-11-30T11:25:00Z"));
        // Friday 2027-02-05 17:55: Monday and Tuesday are Carnival, so Wednesday 08:25.
        assert_eq!(c.add(at("2027-02-05T20:55:00Z"), 30), at("2027-02-10T11:25:00Z"));
        // Opened on Carnival Tuesday: the clock starts Wednesday 08:00.
        assert_eq!(c.add(at("2027-02-09T14:00:00Z"), 30), at("2027-02-10T11:30:00Z"));
        // The operator's own holiday (São Paulo's anniversary, a Monday in 2027).
        let own = Calendar::new(c.hours.clone(), [date("2027-01-25")], Timezone::sao_paulo());
        assert_eq!(
            own.add(at("2027-01-22T20:55:00Z"), 30),
            at("2027-01-26T11:25:00Z")
        );
        assert_eq!(
            c.minutes_between(at("2026-11-27T20:55:00Z"), at("2026-11-30T11:25:00Z")),
            30.0
        );
    }

    #[test]
    fn split_shifts_leave_lunch_out_and_next_opening_is_said_as_people_say_it() {
        let c = desk("seg-sex 08:00-12:00,13:00-18:00; sab 08:00-12:00");
        // Monday 11:50 + 20 minutes: 10 before lunch, 10 after.
        assert_eq!(c.add(at("2026-11-23T14:50:00Z"), 20), at("2026-11-23T16:10:00Z"));
        assert_eq!(
            c.minutes_between(at("2026-11-23T14:00:00Z"), at("2026-11-23T17:00:00Z")),
            120.0
        );
        // Lunch: open again today at 13:00.
        let lunch = at("2026-11-23T15:30:00Z");
        let opening = c.next_opening(lunch).expect("closed at lunch");
        assert_eq!(c.when_said(lunch, opening), "hoje às 13:00");
        assert_eq!(c.next_opening(at("2026-11-23T12:00:00Z")), None);
        // Friday 19:00: Saturday morning.
        let friday = at("2026-11-27T22:00:00Z");
        assert_eq!(
            c.when_said(friday, c.next_opening(friday).expect("closed")),
            "amanhã às 08:00"
        );
        // Saturday 13:00: Monday.
        let saturday = at("2026-11-28T16:00:00Z");
        assert_eq!(
            c.when_said(saturday, c.next_opening(saturday).expect("closed")),
            "na segunda-feira às 08:00"
        );
        // Always open: no opening to wait for, minutes as the clock's.
        let always = Calendar::always();
        assert_eq!(always.next_opening(saturday), None);
        assert_eq!(always.add(saturday, 90), saturday + Duration::minutes(90));
    }
}
