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
}

/// A section type's reader: the file's table (absent: the defaults), then the variables `get` reads.
type ReadSection =
    for<'i> fn(Option<Raw<'i>>, &dyn Fn(&str) -> Option<String>) -> Result<Arc<dyn Section>, SectionError>;

/// How a channel's section is read and described — one type's, [`SectionType::of`]: what the
/// configuration needs of a plug's section without naming its type.
#[derive(Clone, Copy)]
pub struct SectionType {
    read: ReadSection,
    schema: fn(&mut schemars::SchemaGenerator) -> schemars::Schema,
}

impl SectionType {
    /// Section type `T`: read from the file's table (absent: its defaults) with its variables on top;
    /// described by its JSON Schema (its doc comments become the configuration reference).
    pub fn of<T: Section + DeserializeOwned + Default + schemars::JsonSchema>() -> Self {
        Self {
            read: read::<T>,
            schema: schema::<T>,
        }
    }

    /// The section `raw` gives, with the variables `get` reads over it.
    pub(crate) fn read(
        self,
        raw: Option<Raw<'_>>,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn Section>, SectionError> {
        (self.read)(raw, get)
    }

    /// Its JSON Schema, its definitions joining `generator`'s.
    pub(crate) fn schema(self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        (self.schema)(generator)
    }
}

fn read<T: Section + DeserializeOwned + Default>(
    raw: Option<Raw<'_>>,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Section>, SectionError> {
    let keyed = |e: serde_path_to_error::Error<toml::de::Error>| SectionError {
        key: e.path().to_string(),
        error: e.into_inner(),
    };
    let mut section: T = match raw {
        None => T::default(),
        Some(Raw::Text(de)) => serde_path_to_error::deserialize(de).map_err(keyed)?,
        Some(Raw::Value(value)) => serde_path_to_error::deserialize(value).map_err(keyed)?,
    };
    section.override_from(get);
    Ok(Arc::new(section))
}

fn schema<T: schemars::JsonSchema>(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

/// A section as the file gave it: the parser's own table (whose errors keep their line and column),
/// or a value rebuilt after keys were moved between sections.
pub(crate) enum Raw<'i> {
    Text(toml::de::ValueDeserializer<'i>),
    Value(toml::Value),
}

/// A section that did not read: the key inside it (`juntar_ms`) and the parser's error.
pub(crate) struct SectionError {
    pub key: String,
    pub error: toml::de::Error,
}

/// A channel, to the product: everything outside its folder reaches it through this.
pub trait Plug: Send + Sync {
    /// Its name on conversations and outbox items, which is also its section's (`[whatsapp]`).
    fn name(&self) -> &'static str;
    /// What the service must know of it: its window, its native orders, its label.
    fn rules(&self) -> ChannelRules;
    /// Its section's type, `[name]` in the file: `SectionType::of::<MyConfig>()`.
    fn section(&self) -> SectionType;
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
#[derive(Clone)]
pub struct Sections(Vec<(&'static dyn Plug, Arc<dyn Section>)>);

impl Sections {
    /// Each of `plugs` with its default section and the variables `get` reads over it (no file).
    pub(crate) fn defaults(plugs: &[&'static dyn Plug], get: &dyn Fn(&str) -> Option<String>) -> Self {
        Self(
            plugs
                .iter()
                .filter_map(|plug| Some((*plug, plug.section().read(None, get).ok()?)))
                .collect(),
        )
    }

    /// Each of `plugs` with the section `raw` gives it and the variables `get` reads over it (its name
    /// as the key of the error).
    pub(crate) fn read<'i>(
        plugs: &[&'static dyn Plug],
        mut raw: impl FnMut(&str) -> Option<Raw<'i>>,
        get: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, SectionError> {
        let mut sections = Vec::with_capacity(plugs.len());
        for plug in plugs {
            let section = plug
                .section()
                .read(raw(plug.name()), get)
                .map_err(|e| SectionError {
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

    /// The sections.
    pub(crate) fn sections(&self) -> impl Iterator<Item = &dyn Section> {
        self.0.iter().map(|(_, section)| section.as_ref())
    }
}

impl Default for Sections {
    fn default() -> Self {
        Self::defaults(super::PLUGS, &|_| None)
    }
}

impl Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(plug, section)| (plug.name(), section)))
            .finish()
    }
}
