//! The channels of the next ways in: each is a port that turns its platform's wire format into an
//! [`crate::service::Inbound`] and sends outbox items through a [`crate::outbox::ChannelSender`].
//! Platform JSON stops in its channel's module.

pub mod mattermost;
pub mod whatsapp;

/// Whether `given` is the configured secret `expected`, in constant time: the digests are compared, so
/// neither where the two differ nor their lengths show in the time taken. An empty `expected` (not
/// configured) matches nothing.
pub(crate) fn same_secret(given: &str, expected: &str) -> bool {
    use sha2::{Digest, Sha256};
    let (a, b) = (
        Sha256::digest(given.as_bytes()),
        Sha256::digest(expected.as_bytes()),
    );
    !expected.is_empty() && a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
