//! The policy's time zone: any IANA name, from the time-zone database bundled in the binary (the same
//! answers on every machine, with or without the system's `tzdata`).
//!
//! jiff's bundled database, not chrono-tz: chrono-tz compiles every zone into pointer-laden tables,
//! 1 MB the dynamic loader relocated at every start (`run-flow`, interleaved: 11.6 → 10.4 ms).
//! Formatting stays with chrono, at the zone's offset for the instant.

use std::sync::LazyLock;

use chrono::{DateTime, FixedOffset, Utc};

/// An IANA time zone.
#[derive(Clone, PartialEq, Eq)]
pub struct Timezone {
    name: String,
    zone: jiff::tz::TimeZone,
}

static SAO_PAULO: LazyLock<Timezone> = LazyLock::new(|| {
    Timezone::named("America/Sao_Paulo").expect("America/Sao_Paulo is in the bundled database")
});

impl Timezone {
    /// The product's default zone, `America/Sao_Paulo`.
    pub fn sao_paulo() -> Self {
        SAO_PAULO.clone()
    }

    /// The zone of an IANA name (`America/Sao_Paulo`, `UTC`, …); `None` for a name the database
    /// does not have.
    pub fn named(name: &str) -> Option<Self> {
        let zone = jiff::tz::db().get(name).ok()?;
        let name = zone.iana_name().unwrap_or(name).to_owned();
        Some(Self { name, zone })
    }

    /// The IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instant a wall-clock time of this zone names; in a gap or a fold of a change of offset, the
    /// earlier reading (jiff's "compatible" rule, as calendars read it).
    pub fn instant(&self, local: chrono::NaiveDateTime) -> DateTime<Utc> {
        use chrono::{Datelike, Timelike};
        let civil = jiff::civil::DateTime::new(
            local.year() as i16,
            local.month() as i8,
            local.day() as i8,
            local.hour() as i8,
            local.minute() as i8,
            local.second() as i8,
            0,
        );
        let seconds = civil
            .ok()
            .and_then(|c| self.zone.to_ambiguous_timestamp(c).compatible().ok())
            .map(|ts| ts.as_second());
        // Beyond jiff's years (±9999): read as UTC, as `local` does.
        seconds
            .and_then(|s| DateTime::from_timestamp(s, 0))
            .unwrap_or_else(|| local.and_utc())
    }

    /// `t` as the local time of this zone, with the zone's offset at that instant (UTC's for an instant
    /// beyond the database's years, ±9999).
    pub fn local(&self, t: DateTime<Utc>) -> DateTime<FixedOffset> {
        let offset = jiff::Timestamp::new(t.timestamp(), t.timestamp_subsec_nanos() as i32)
            .map(|ts| self.zone.to_offset(ts).seconds())
            .unwrap_or(0);
        let offset = FixedOffset::east_opt(offset).unwrap_or_else(|| FixedOffset::east_opt(0).expect("UTC"));
        t.with_timezone(&offset)
    }
}

impl std::fmt::Debug for Timezone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().expect("instant")
    }

    #[test]
    fn a_wall_clock_time_is_the_instant_its_zone_says_then() {
        let sp = Timezone::sao_paulo();
        let at = |s: &str| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").expect("time");
        // São Paulo is UTC-3 today, and was UTC-2 in its summer time of 2018–2019.
        assert_eq!(
            sp.instant(at("2026-11-27 17:55")).to_rfc3339(),
            "2026-11-27T20:55:00+00:00"
        );
        assert_eq!(
            sp.instant(at("2019-01-15 12:00")).to_rfc3339(),
            "2019-01-15T14:00:00+00:00"
        );
        let t = sp.instant(at("2026-06-01 08:00"));
        assert_eq!(sp.local(t).naive_local(), at("2026-06-01 08:00"));
    }

    #[test]
    fn local_times_carry_the_zones_offset_at_that_instant() {
        for (zone, instant, local) in [
            (
                "America/Sao_Paulo",
                "2026-11-22T12:00:00Z",
                "2026-11-22T09:00:00-03:00",
            ),
            // Brazil kept daylight saving time until 2019: the offset is the one of the instant.
            (
                "America/Sao_Paulo",
                "2018-12-01T12:00:00Z",
                "2018-12-01T10:00:00-02:00",
            ),
            (
                "America/New_York",
                "2026-07-01T12:00:00Z",
                "2026-07-01T08:00:00-04:00",
            ),
            (
                "America/New_York",
                "2026-01-01T12:00:00Z",
                "2026-01-01T07:00:00-05:00",
            ),
            (
                "Asia/Kolkata",
                "2026-01-01T00:00:00Z",
                "2026-01-01T05:30:00+05:30",
            ),
            ("UTC", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00+00:00"),
        ] {
            let tz = Timezone::named(zone).expect("zone");
            assert_eq!(tz.local(utc(instant)).to_rfc3339(), local, "{zone} at {instant}");
        }
    }

    #[test]
    fn names_are_read_as_the_database_spells_them() {
        let sp = Timezone::named("america/sao_paulo").expect("IANA names are case-insensitive");
        assert_eq!(sp.name(), "America/Sao_Paulo");
        assert_eq!(sp, Timezone::sao_paulo());
    }

    #[test]
    fn unknown_names_are_refused() {
        assert!(Timezone::named("Marte/Base").is_none());
        assert!(Timezone::named("").is_none());
    }
}
