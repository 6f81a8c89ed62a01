//! What the service must know of a conversation's channel, declared by the channel (`channels`,
//! listed once by `app::channel_book`) and asked of the conversation's channel — never of its name: no
//! rule here compares a channel name, so a new channel brings its rules with it instead of an
//! `== "name"` beside each.

use std::sync::Arc;

use chrono::Duration;

/// A channel's rules, as far as the service's jobs need them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelRules {
    /// How long after a person's last message the channel takes free-form messages. Past it, only a
    /// template approved at the platform goes out, and only with the person's recorded opt-in: so a
    /// windowed channel's late messages carry their template's purpose, and its people's "PARAR" /
    /// "VOLTAR" are recorded as consent. `None`: any message, any time.
    pub window: Option<Duration>,
    /// A Pix charge can be shown as the platform's native order (where the account takes payments,
    /// `[pix] whatsapp_order_details`).
    pub native_orders: bool,
    /// The channel's name as support agents read it ("Janela do … até" on a case).
    pub label: &'static str,
    /// Its people read replies in the answer to their request or in the stored conversation (the
    /// terminal, HTTP, a flow's API): no worker sends there, so what is said late is on record as
    /// delivered — unless the tenant has its late messages pushed ([`super::ServicesConfig::pushed`]).
    pub read_in_conversation: bool,
    /// How a person who gave the channel no name is named to support agents, beside when they came
    /// (the web chat's anonymous visitors); `None`: by their id on the channel.
    pub visitor: Option<&'static str>,
}

/// Every channel's rules by the name conversations carry, in the order they were declared; an
/// unknown channel has none (no window, no native orders). A handful of channels: a list is enough.
#[derive(Debug, Clone, Default)]
pub struct ChannelBook(Arc<Vec<(String, ChannelRules)>>);

static NONE: ChannelRules = ChannelRules {
    window: None,
    native_orders: false,
    label: "",
    read_in_conversation: false,
    visitor: None,
};

impl ChannelBook {
    pub fn new<'a>(channels: impl IntoIterator<Item = (&'a str, ChannelRules)>) -> Self {
        Self(Arc::new(
            channels
                .into_iter()
                .map(|(name, rules)| (name.to_owned(), rules))
                .collect(),
        ))
    }

    /// The rules of `channel` (a conversation's).
    pub fn of(&self, channel: &str) -> &ChannelRules {
        self.0
            .iter()
            .find(|(name, _)| name == channel)
            .map_or(&NONE, |(_, rules)| rules)
    }

    /// The channels' names, as declared (the console's filter lists them).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(name, _)| name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_channel_has_no_window() {
        let book = ChannelBook::new([(
            "zap",
            ChannelRules {
                window: Some(Duration::hours(24)),
                native_orders: true,
                label: "Zap",
                read_in_conversation: false,
                visitor: None,
            },
        )]);
        assert_eq!(book.of("zap").window, Some(Duration::hours(24)));
        assert_eq!(book.of("sms"), &ChannelRules::default());
    }
}
