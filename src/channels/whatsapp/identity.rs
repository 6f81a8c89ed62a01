//! Who a WhatsApp person is. Meta names a person by their phone (`wa_id`, `from`), by their
//! business-scoped user id (a BSUID: `BR.` and up to 128 letters and digits; `user_id`,
//! `from_user_id`, `recipient_user_id`), or by both; a username adopter with no recent contact comes
//! with the BSUID only (in `from_user_id`, or in `from` itself), and a new phone number brings a new
//! BSUID (`user_id_update`). The store links every identifier seen on the business number to the
//! person's key — the first one seen, the user id of their conversation — so the conversation, its
//! remembered cards, its waiting confirmation and its case continue whichever arrives
//! ([`vt_store::ContactStore::whatsapp_person`]); a send goes to their phone where one is theirs, else
//! to their BSUID (`recipient`).

use super::wire;
use vt_store::WhatsAppIds;

/// The longest BSUID Meta issues: a country, a dot, up to 128 letters and digits (`ENT.` for a parent).
const MAX_BSUID: usize = 2 + 1 + 4 + 128;

/// Whether `s` is a business-scoped user id (`BR.1502576394655843`, `US.ENT.118…`), not a phone.
pub(crate) fn is_bsuid(s: &str) -> bool {
    let Some((country, rest)) = s.split_once('.') else {
        return false;
    };
    let rest = rest.strip_prefix("ENT.").unwrap_or(rest);
    s.len() <= MAX_BSUID
        && country.len() == 2
        && country.bytes().all(|b| b.is_ascii_uppercase())
        && !rest.is_empty()
        && rest.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Whether `s` is a phone as Meta sends it (digits only).
fn is_phone(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// What message `m` of a notification (`contacts` beside it) names its sender by.
pub(super) fn of_message(contacts: &[wire::Contact], m: &wire::Message) -> WhatsAppIds {
    let from = m.from.as_deref();
    let bsuid = m
        .from_user_id
        .as_deref()
        .or(from.filter(|f| is_bsuid(f)))
        .map(str::to_owned);
    let phone = from.filter(|f| is_phone(f)).map(str::to_owned);
    let contact = contact_of(contacts, phone.as_deref(), bsuid.as_deref());
    WhatsAppIds {
        phone: phone.or_else(|| contact.and_then(|c| c.wa_id.clone()).filter(|w| is_phone(w))),
        bsuid: bsuid.or_else(|| contact.and_then(|c| c.user_id.clone()).filter(|u| is_bsuid(u))),
    }
}

/// The contact that is the sender: the one with their phone or BSUID, else the only one.
pub(super) fn contact_of<'a>(
    contacts: &'a [wire::Contact],
    phone: Option<&str>,
    bsuid: Option<&str>,
) -> Option<&'a wire::Contact> {
    let named = |c: &&wire::Contact| {
        (phone.is_some() && c.wa_id.as_deref() == phone) || (bsuid.is_some() && c.user_id.as_deref() == bsuid)
    };
    contacts
        .iter()
        .find(named)
        .or_else(|| (contacts.len() == 1).then(|| &contacts[0]))
}

/// What a status names the person our message went to by, when it names both their phone and their
/// BSUID (then they are linked).
pub(super) fn of_status(s: &wire::Status) -> Option<WhatsAppIds> {
    let phone = s.recipient_id.as_deref().filter(|p| is_phone(p))?;
    let bsuid = s.recipient_user_id.as_deref().filter(|b| is_bsuid(b))?;
    Some(WhatsAppIds {
        phone: Some(phone.to_owned()),
        bsuid: Some(bsuid.to_owned()),
    })
}

/// The change a system message reports: the sender's old identifier and their new one.
pub(super) fn change_of(m: &wire::Message) -> Option<(String, String)> {
    let system = m.system.as_ref()?;
    match system.kind.as_str() {
        "user_id_update" => {
            let from = m
                .from_user_id
                .as_deref()
                .or(m.from.as_deref().filter(|f| is_bsuid(f)))?;
            let to = system.user_id.as_deref().filter(|u| is_bsuid(u))?;
            Some((from.to_owned(), to.to_owned()))
        }
        "user_changed_number" => {
            let from = m.from.as_deref().filter(|f| is_phone(f))?;
            let to = system.wa_id.as_deref().filter(|w| is_phone(w))?;
            Some((from.to_owned(), to.to_owned()))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bsuid_is_told_from_a_phone() {
        assert!(is_bsuid("BR.1502576394655843"));
        assert!(is_bsuid("US.ENT.11815799212886844830"));
        assert!(is_bsuid("BR.abcXYZ09"));
        assert!(!is_bsuid("5511987654321"));
        assert!(!is_bsuid("br.123"));
        assert!(!is_bsuid("BR."));
        assert!(!is_bsuid("BRA.123"));
        assert!(!is_bsuid("BR.12-34"));
        assert!(!is_bsuid(&format!("BR.{}", "1".repeat(140))));
        assert!(is_phone("5511987654321") && !is_phone("BR.1") && !is_phone(""));
    }
}
