//! Deterministic idempotency keys: the same inputs always give the same key (UUID v5), so a repeated
//! request is recognised by the external system instead of being executed twice.

use uuid::Uuid;

/// The namespace of every vt-agent key (a fixed random UUID).
const NAMESPACE: Uuid = Uuid::from_u128(0x6f1c_2a3e_8d4b_4f5a_9c0e_7b2d_1a3c_5e7f);

fn key(parts: &[&str]) -> String {
    Uuid::new_v5(&NAMESPACE, parts.join("|").as_bytes()).to_string()
}

/// RF1: one key per (card, endpoint, hour window `YYYYMMDD-HH` in the policy's timezone).
pub fn consulta(cartao: &str, endpoint: &str, hour_window: &str) -> String {
    key(&["consulta", cartao, endpoint, hour_window])
}

/// RF6: one key per (card, value with two places, currency).
pub fn recarga(cartao: &str, valor: &str, moeda: &str) -> String {
    key(&["recarga", cartao, valor, moeda])
}

/// RF6 for a request that carries its own key (the caller's, or a chat's pending confirmation): one key
/// per (tenant, that key), so one request is one charge however often it is sent, and a new request is a
/// new charge even for the same card and value.
pub(crate) fn recarga_pedido(tenant: &str, request_key: &str) -> String {
    key(&["recarga-pedido", tenant, request_key])
}

/// RF5/RF10: one key per notification content that must go out once.
pub fn notificacao(parts: &[&str]) -> String {
    let mut all = vec!["notificacao"];
    all.extend_from_slice(parts);
    key(&all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_deterministic_and_distinct() {
        assert_eq!(
            consulta("1", "/e", "20261122-10"),
            consulta("1", "/e", "20261122-10")
        );
        assert_ne!(
            consulta("1", "/e", "20261122-10"),
            consulta("1", "/e", "20261122-11")
        );
        assert_ne!(
            consulta("1", "/e", "20261122-10"),
            consulta("2", "/e", "20261122-10")
        );
        assert_eq!(recarga("1", "50.00", "BRL"), recarga("1", "50.00", "BRL"));
        assert_ne!(recarga("1", "50.00", "BRL"), recarga("1", "50.01", "BRL"));
        assert_ne!(recarga("1", "50.00", "BRL"), recarga("1", "50.00", "USD"));
        assert_ne!(recarga("1", "50.00", "BRL"), consulta("1", "50.00", "BRL"));
        assert_eq!(recarga_pedido("t", "p1"), recarga_pedido("t", "p1"));
        assert_ne!(recarga_pedido("t", "p1"), recarga_pedido("t", "p2"));
        assert_ne!(
            recarga_pedido("t", "p1"),
            recarga_pedido("u", "p1"),
            "scoped to the tenant"
        );
    }
}
