//! WhatsApp identities (`whatsapp_identities`), once for both backends: which person a phone or a
//! business-scoped user id is on a business number, and where that person is reached now.

use chrono::{DateTime, Utc};

use super::{Sql, Stmt};
use crate::rows::Columns;
use crate::{StoreError, WhatsAppIds};

/// What an identifier is on record: whose, and whether it is still theirs.
struct Known {
    identifier: String,
    person: String,
    retired: bool,
}

/// The rows of `identifiers` on `number`, retired ones too.
async fn known<S: Sql>(store: &S, number: &str, identifiers: &[&str]) -> Result<Vec<Known>, StoreError> {
    let (first, second) = match identifiers {
        [one] => (*one, *one),
        [one, two, ..] => (*one, *two),
        [] => return Ok(Vec::new()),
    };
    let rows = store
        .read_fresh(
            Stmt::new(
                "SELECT identifier, person, retired_at FROM whatsapp_identities \
                 WHERE phone_number_id = $1 AND identifier IN ($2, $3) ORDER BY seen_at",
            )
            .bind(number)
            .bind(first)
            .bind(second),
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Known {
                identifier: r.value("identifier")?,
                person: r.value("person")?,
                retired: r.opt_time("retired_at")?.is_some(),
            })
        })
        .collect()
}

/// `identifier` (of `kind`) is `person`'s on `number` from `now`: a retired row comes back to them.
fn link(number: &str, (identifier, kind): (&str, &str), person: &str, now: DateTime<Utc>) -> Stmt {
    Stmt::new(
        "INSERT INTO whatsapp_identities (phone_number_id, identifier, kind, person, seen_at, retired_at) \
         VALUES ($1, $2, $3, $4, $5, NULL) ON CONFLICT (phone_number_id, identifier) DO UPDATE SET \
         person = CASE WHEN whatsapp_identities.retired_at IS NULL THEN whatsapp_identities.person \
                  ELSE excluded.person END, \
         seen_at = excluded.seen_at, retired_at = NULL",
    )
    .bind(number)
    .bind(identifier)
    .bind(kind)
    .bind(person)
    .bind(now)
}

/// The identifiers `seen` names, the BSUID first (Meta's own key for the person), with their kinds.
fn named(seen: &WhatsAppIds) -> Vec<(&str, &'static str)> {
    let bsuid = seen.bsuid.as_deref().map(|b| (b, "bsuid"));
    let phone = seen.phone.as_deref().map(|p| (p, "telefone"));
    bsuid.into_iter().chain(phone).collect()
}

pub(crate) async fn person<S: Sql>(
    store: &S,
    number: &str,
    seen: &WhatsAppIds,
    now: DateTime<Utc>,
) -> Result<String, StoreError> {
    let named = named(seen);
    let ids: Vec<&str> = named.iter().map(|(id, _)| *id).collect();
    let Some(first) = ids.first().copied() else {
        return Err(StoreError::Invalid(
            "uma pessoa do WhatsApp sem telefone nem BSUID".into(),
        ));
    };
    let rows = known(store, number, &ids).await?;
    let active: Vec<&Known> = rows.iter().filter(|k| !k.retired).collect();
    // Everything named is theirs already, and of one person: nothing to write (a status, a message
    // of someone known).
    if let Some(one) = active.first()
        && active.len() == ids.len()
        && active.iter().all(|k| k.person == one.person)
    {
        return Ok(one.person.clone());
    }
    let person = match active.first() {
        Some(k) => k.person.clone(),
        // A new person: keyed by the phone, as before identities were kept, unless that phone was
        // someone's before (a number given to another person): then by the BSUID.
        None => {
            let used = |id: &str| rows.iter().any(|k| k.identifier == id);
            seen.phone
                .as_deref()
                .filter(|p| !used(p))
                .or(seen.bsuid.as_deref())
                .unwrap_or(first)
                .to_owned()
        }
    };
    let links = named
        .iter()
        .map(|(id, kind)| link(number, (id, kind), &person, now))
        .collect();
    store.write_all(links).await?;
    // Another process may have linked the first identifier first: its person is the one.
    Ok(person_of(store, number, first).await?.unwrap_or(person))
}

pub(crate) async fn person_of<S: Sql>(
    store: &S,
    number: &str,
    identifier: &str,
) -> Result<Option<String>, StoreError> {
    Ok(known(store, number, &[identifier])
        .await?
        .into_iter()
        .find(|k| !k.retired)
        .map(|k| k.person))
}

pub(crate) async fn moved<S: Sql>(
    store: &S,
    number: &str,
    (from, to): (&str, &str),
    now: DateTime<Utc>,
) -> Result<Option<String>, StoreError> {
    let Some(person) = person_of(store, number, from).await? else {
        return Ok(None);
    };
    let kind = if to.contains('.') { "bsuid" } else { "telefone" };
    let retire = Stmt::new(
        "UPDATE whatsapp_identities SET retired_at = $1 \
         WHERE phone_number_id = $2 AND person = $3 AND retired_at IS NULL AND identifier <> $4",
    )
    .bind(now)
    .bind(number)
    .bind(person.as_str())
    .bind(to);
    let moved_in = Stmt::new(
        "INSERT INTO whatsapp_identities (phone_number_id, identifier, kind, person, seen_at, retired_at) \
         VALUES ($1, $2, $3, $4, $5, NULL) ON CONFLICT (phone_number_id, identifier) DO UPDATE SET \
         person = excluded.person, seen_at = excluded.seen_at, retired_at = NULL",
    )
    .bind(number)
    .bind(to)
    .bind(kind)
    .bind(person.as_str())
    .bind(now);
    store.write_all(vec![retire, moved_in]).await?;
    Ok(Some(person))
}

pub(crate) async fn address<S: Sql>(
    store: &S,
    number: &str,
    person: &str,
) -> Result<WhatsAppIds, StoreError> {
    let rows = store
        .read_fresh(
            Stmt::new(
                "SELECT identifier, kind FROM whatsapp_identities \
                 WHERE phone_number_id = $1 AND person = $2 AND retired_at IS NULL ORDER BY seen_at DESC",
            )
            .bind(number)
            .bind(person),
        )
        .await?;
    let mut ids = WhatsAppIds::default();
    for r in &rows {
        let (identifier, kind): (String, String) = (r.value("identifier")?, r.value("kind")?);
        let slot = if kind == "bsuid" {
            &mut ids.bsuid
        } else {
            &mut ids.phone
        };
        if slot.is_none() {
            *slot = Some(identifier);
        }
    }
    Ok(ids)
}
