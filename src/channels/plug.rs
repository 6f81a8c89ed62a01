//! A channel as the rest of the product meets it: a [`Plug`] names the channel, says its rules to the
//! service, reads its own section of the configuration file (with its `VT_*` variables, its checks
//! and its secrets) and builds the [`super::Channel`] `serve` runs. The configuration keeps each
//! plug with its section ([`Sections`]); `serve`, the service's channel book and the engine's notices
//! iterate them. Adding a channel is its folder and one entry in [`super::PLUGS`].

use std::any::Any;
use std::fmt::Debug;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::whatsapp::NoticesConfig;
use super::{Channel, Wiring};
use crate::service::ChannelRules;

/// A channel's section of the configuration file (`[whatsapp]`), once read.
pub trait Section: Any + Debug + Send + Sync {
    /// Its `VT_*` variables over the file's values (`get` reads one; empty is unset).
    fn override_from(&mut self, get: &dyn Fn(&str) -> Option<String>);
    /// The first value that parses but cannot work, as `(field, why)`: the field with its section's
    /// name (`whatsapp.app_secret`), never the value.
    fn problem(&self) -> Option<(String, String)>;
    /// Its secrets join the set every log line and record is scrubbed of.
    fn register_secrets(&self);
    /// A copy, for a configuration that is cloned.
    fn boxed(&self) -> Box<dyn Section>;
}

/// A section as the file gave it: the parser's own table (whose errors keep their line and column),
/// or a value rebuilt after keys were moved between sections.
pub enum Raw<'i> {
    Text(toml::de::ValueDeserializer<'i>),
    Value(toml::Value),
}

/// A section that did not read: the key inside it (`juntar_ms`) and the parser's error.
pub struct SectionError {
    pub key: String,
    pub error: toml::de::Error,
}

impl Raw<'_> {
    /// Section `T` read from `raw` (absent: its defaults) — what a plug's [`Plug::section`] is, in one
    /// call.
    pub fn read<T: Section + DeserializeOwned + Default>(
        raw: Option<Self>,
    ) -> Result<Box<dyn Section>, SectionError> {
        let keyed = |e: serde_path_to_error::Error<toml::de::Error>| SectionError {
            key: e.path().to_string(),
            error: e.into_inner(),
        };
        let section: T = match raw {
            None => T::default(),
            Some(Raw::Text(de)) => serde_path_to_error::deserialize(de).map_err(keyed)?,
            Some(Raw::Value(value)) => serde_path_to_error::deserialize(value).map_err(keyed)?,
        };
        Ok(Box::new(section))
    }
}

/// A channel, to the product: everything outside its folder reaches it through this.
pub trait Plug: Send + Sync {
    /// Its name on conversations and outbox items, which is also its section's (`[whatsapp]`).
    fn name(&self) -> &'static str;
    /// What the service must know of it: its window, its native orders, its label.
    fn rules(&self) -> ChannelRules;
    /// Its section, read from the file's table (absent: the defaults): usually [`Raw::read`].
    fn section(&self, raw: Option<Raw<'_>>) -> Result<Box<dyn Section>, SectionError>;
    /// Its section's JSON Schema, for `vt-agent config schema` and the reference.
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;
    /// What it brings to `serve`, from its section (and the rest of the configuration); off: a
    /// [`Channel`] with nothing in it.
    fn build(&self, settings: &dyn Settings, wiring: &Wiring) -> anyhow::Result<Channel>;
    /// Whether it shows the support board (cases as threads an agent answers in), as configured.
    fn keeps_board(&self, _settings: &dyn Settings) -> bool {
        false
    }
    /// The notices the engine's flows send through it themselves, when it sends them.
    fn notices(
        &self,
        _settings: &dyn Settings,
        _stores: &vt_store::Stores,
    ) -> Option<Arc<dyn vt_domain::stages::channel_notices::ChannelNotices>> {
        None
    }
}

/// What a channel may read of the configuration: the plugged sections, and the few settings of other
/// sections a channel serves (the configuration implements it; a channel never names it).
pub trait Settings {
    /// Every plugged channel's section.
    fn sections(&self) -> &Sections;
    /// Where the approved message templates are (`templates_dir`).
    fn templates_dir(&self) -> std::path::PathBuf;
    /// `[notificacoes]`: restraint in the notices the product sends itself.
    fn notices(&self) -> &NoticesConfig;
    /// The operator's time zone (`[vt.politicas] timezone`), for quiet hours.
    fn timezone(&self) -> vt_domain::vt::timezone::Timezone;
}

/// Every plugged channel with its section, in the order they were plugged.
pub struct Sections(Vec<(&'static dyn Plug, Box<dyn Section>)>);

impl Sections {
    /// Each of `plugs` with its default section (no file).
    pub fn defaults(plugs: &[&'static dyn Plug]) -> Self {
        Self(
            plugs
                .iter()
                .filter_map(|plug| Some((*plug, plug.section(None).ok()?)))
                .collect(),
        )
    }

    /// Each of `plugs` with the section `raw` gives it (its name as the key of the error).
    pub(crate) fn read<'i>(
        plugs: &[&'static dyn Plug],
        mut raw: impl FnMut(&str) -> Option<Raw<'i>>,
    ) -> Result<Self, SectionError> {
        let mut sections = Vec::with_capacity(plugs.len());
        for plug in plugs {
            let section = plug.section(raw(plug.name())).map_err(|e| SectionError {
                key: match e.key.as_str() {
                    "" | "." => plug.name().to_owned(),
                    key => format!("{}.{key}", plug.name()),
                },
                error: e.error,
            })?;
            sections.push((*plug, section));
        }
        Ok(Self(sections))
    }

    /// The section of type `T`, if a plugged channel reads one.
    pub fn get<T: Section>(&self) -> Option<&T> {
        self.0
            .iter()
            .find_map(|(_, section)| (section.as_ref() as &dyn Any).downcast_ref())
    }

    /// The plugged channels.
    pub fn plugs(&self) -> impl Iterator<Item = &'static dyn Plug> + '_ {
        self.0.iter().map(|(plug, _)| *plug)
    }

    /// The sections, to take their variables.
    pub(crate) fn sections_mut(&mut self) -> impl Iterator<Item = &mut Box<dyn Section>> {
        self.0.iter_mut().map(|(_, section)| section)
    }

    /// The sections.
    pub(crate) fn sections(&self) -> impl Iterator<Item = &dyn Section> {
        self.0.iter().map(|(_, section)| section.as_ref())
    }
}

impl Default for Sections {
    fn default() -> Self {
        Self::defaults(super::PLUGS)
    }
}

impl Clone for Sections {
    fn clone(&self) -> Self {
        Self(
            self.0
                .iter()
                .map(|(plug, section)| (*plug, section.boxed()))
                .collect(),
        )
    }
}

impl Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(plug, section)| (plug.name(), section)))
            .finish()
    }
}
