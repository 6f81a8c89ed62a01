//! WhatsApp identities: a phone and a BSUID linked to one person, the person found by either, a new
//! BSUID moving in and the old phone retiring, and a recycled phone never taken for its old owner.

use std::sync::Arc;

use vt_store::Store;
use vt_store::WhatsAppIds;

use super::t;

/// Minute `m` of the day the tests run in.
fn at(m: u32) -> chrono::DateTime<chrono::Utc> {
    t(&format!("2026-11-29T10:0{m}:00Z"))
}

const NUMBER: &str = "106540352242922";

fn ids(phone: Option<&str>, bsuid: Option<&str>) -> WhatsAppIds {
    WhatsAppIds {
        phone: phone.map(str::to_owned),
        bsuid: bsuid.map(str::to_owned),
    }
}

pub(crate) async fn a_whatsapp_person_is_one_whichever_identifier_arrives(store: Arc<dyn Store>) {
    let (phone, bsuid, new) = ("5511987654321", "BR.1502576394655843", "BR.9990001112223334");
    // First their phone alone (a person from before BSUIDs): keyed by it.
    let p = store
        .whatsapp_person(NUMBER, &ids(Some(phone), None), at(0))
        .await
        .expect("person");
    assert_eq!(p, phone);
    // Then both: the BSUID joins them; then the BSUID alone finds them.
    assert_eq!(
        store
            .whatsapp_person(NUMBER, &ids(Some(phone), Some(bsuid)), at(1))
            .await
            .expect("both"),
        phone
    );
    assert_eq!(
        store
            .whatsapp_person(NUMBER, &ids(None, Some(bsuid)), at(2))
            .await
            .expect("bsuid"),
        phone
    );
    assert_eq!(
        store.whatsapp_person_of(NUMBER, bsuid).await.expect("of"),
        Some(phone.to_owned())
    );
    assert_eq!(
        store.whatsapp_person_of("other-number", bsuid).await.expect("of"),
        None
    );
    assert_eq!(
        store.whatsapp_address(NUMBER, phone).await.expect("address"),
        ids(Some(phone), Some(bsuid))
    );

    // A new number: the new BSUID is theirs, the old phone and BSUID are not.
    assert_eq!(
        store
            .whatsapp_moved(NUMBER, (bsuid, new), at(3))
            .await
            .expect("moved"),
        Some(phone.to_owned())
    );
    assert_eq!(
        store.whatsapp_address(NUMBER, phone).await.expect("address"),
        ids(None, Some(new))
    );
    assert_eq!(
        store
            .whatsapp_person(NUMBER, &ids(None, Some(new)), at(4))
            .await
            .expect("new"),
        phone
    );
    assert_eq!(store.whatsapp_person_of(NUMBER, bsuid).await.expect("of"), None);
    // Someone unknown moving is no one's business.
    assert_eq!(
        store
            .whatsapp_moved(NUMBER, ("BR.0000000000000001", "BR.2"), at(5))
            .await
            .expect("moved"),
        None
    );

    // The old phone, given to someone else, is a new person (by their BSUID), not the old one.
    let stranger = "BR.4445556667778889";
    let q = store
        .whatsapp_person(NUMBER, &ids(Some(phone), Some(stranger)), at(6))
        .await
        .expect("stranger");
    assert_eq!(q, stranger);
    assert_eq!(
        store.whatsapp_address(NUMBER, stranger).await.expect("address"),
        ids(Some(phone), Some(stranger))
    );
    assert_eq!(
        store.whatsapp_address(NUMBER, phone).await.expect("address"),
        ids(None, Some(new))
    );
    // A person with nothing on record is reached at their key, by the sender.
    assert_eq!(
        store
            .whatsapp_address(NUMBER, "5511000000000")
            .await
            .expect("address"),
        ids(None, None)
    );
}
