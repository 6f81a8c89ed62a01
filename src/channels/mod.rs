//! The channels of the next ways in: each is a port that turns its platform's wire format into an
//! [`crate::service::Inbound`] and sends outbox items through a [`crate::outbox::ChannelSender`].
//! Platform JSON stops in its channel's module.

pub mod mattermost;
pub mod whatsapp;
