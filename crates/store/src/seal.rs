//! Sealed at rest: what the product keeps of people — message texts, conversation state and memory
//! (cards the user gave, the pending recharge), turn events, flow inputs and outputs, batch inputs with
//! their payment tokens — is written encrypted (AES-256-GCM) under a data key, so a stolen database
//! file or backup hands over no card number. What stays clear is what lookups need and is no secret:
//! ids, statuses, times, masked cards, keyed hashes, and a masked copy of each message for the console's
//! search.
//!
//! A sealed value is text: `v1:{key id}:{base64 of nonce ‖ ciphertext}`, the key id bound into the
//! ciphertext as associated data. The key id is derived from the key itself, so a value names the key
//! it needs, and a missing key is an error that names it (never garbage). Values written before sealing
//! existed read as they are, and [`super::KeepingStore::reseal`] seals them (at start, once) or moves every
//! value to the current key (`vt-agent keys rotate`).
//!
//! The keys come from `[storage] encryption_key` / `VT_ENCRYPTION_KEY` (plus `previous_keys` while a
//! rotation runs), else from a key file created beside the SQLite database on first run (mode 0600:
//! keep it out of the database's backups). They are installed once per process ([`install`]), as the
//! configured secrets are for the log writer: every row-mapping function of both stores seals and
//! opens, and none of them can be handed the ring. A process that installs none (an in-memory store
//! in a test) seals under a random key of its own.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, PoisonError, RwLock};

use aes_gcm::aead::{AeadCore, AeadInPlace, KeyInit, OsRng};
use aes_gcm::{Aes256Gcm, Key, Nonce, Tag};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// What every sealed value starts with.
const PREFIX: &str = "v1:";
const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// The key file beside the SQLite database.
pub const KEY_FILE: &str = "vt-agent.key";

/// `[storage]` in the configuration file.
#[derive(Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// The data key, 32 bytes in base64 (`VT_ENCRYPTION_KEY`). Absent: the key file.
    pub encryption_key: Option<String>,
    /// Keys values may still be sealed under while `vt-agent keys rotate` moves them to
    /// `encryption_key`.
    pub previous_keys: Vec<String>,
}

impl std::fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageConfig")
            .field(
                "encryption_key",
                &self.encryption_key.as_ref().map(|_| "[redigido]"),
            )
            .field("previous_keys", &self.previous_keys.len())
            .finish()
    }
}

impl StorageConfig {
    /// Checks the keys when the configuration is loaded; the error is `(field, why)`.
    pub fn validate(&self) -> Result<(), (String, &'static str)> {
        let why = "deve ter 32 bytes em base64 (ex.: `openssl rand -base64 32`)";
        if let Some(k) = &self.encryption_key
            && decode_key(k).is_none()
        {
            return Err(("storage.encryption_key".into(), why));
        }
        for (i, k) in self.previous_keys.iter().enumerate() {
            if decode_key(k).is_none() {
                return Err((format!("storage.previous_keys[{i}]"), why));
            }
        }
        Ok(())
    }

    /// Registers the keys as secrets: no log line or error ever shows them.
    pub fn register_secrets(&self) {
        for k in self.encryption_key.iter().chain(&self.previous_keys) {
            vt_contract::redact::register_secret(k);
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(
        "um valor guardado está selado com a chave {0}, que não está configurada: defina [storage] encryption_key \
         ou previous_keys, ou restaure o arquivo de chaves"
    )]
    UnknownKey(String),
    #[error(
        "um valor guardado, selado com a chave {0}, não pôde ser aberto: a chave está errada ou o valor danificado"
    )]
    Damaged(String),
    #[error("um valor guardado não está selado")]
    Malformed,
    #[error("o arquivo de chaves {path}")]
    KeyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("o arquivo de chaves {0} tem uma linha que não é uma chave de 32 bytes em base64")]
    BadKeyFile(String),
}

/// One data key and its id.
#[derive(Clone)]
pub struct DataKey {
    id: String,
    /// `v1:{id}`: what its values start with, and their associated data.
    label: String,
    cipher: Aes256Gcm,
    bytes: [u8; 32],
}

impl DataKey {
    pub fn new(bytes: [u8; 32]) -> Self {
        let id = hex::encode(
            &Sha256::new_with_prefix(b"vt-agent data key id\0")
                .chain_update(bytes)
                .finalize()[..4],
        );
        Self {
            label: format!("{PREFIX}{id}"),
            id,
            cipher: Aes256Gcm::new(&Key::<Aes256Gcm>::from(bytes)),
            bytes,
        }
    }

    /// A new random key.
    pub fn generate() -> Self {
        Self::new(Aes256Gcm::generate_key(&mut OsRng).into())
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn to_base64(&self) -> String {
        B64.encode(self.bytes)
    }
}

/// A key written in base64, if it is 32 bytes.
pub fn decode_key(text: &str) -> Option<[u8; 32]> {
    B64.decode(text.trim()).ok()?.try_into().ok()
}

/// The keys of this process: values are sealed under `current`, opened under any.
#[derive(Clone)]
pub struct KeyRing {
    current: DataKey,
    others: Vec<DataKey>,
    /// The store's index key, once the key file has it (see [`super::prepare_sealing`]).
    index: Option<[u8; 32]>,
}

/// The key file's line that holds the store's index key.
const INDEX_LINE: &str = "indice ";

/// Where the ring came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Configured,
    /// The key file, and whether this run created it.
    File {
        path: PathBuf,
        created: bool,
    },
}

impl KeyRing {
    pub fn new(current: DataKey, others: Vec<DataKey>) -> Self {
        Self {
            current,
            others,
            index: None,
        }
    }

    /// The ring with the store's index key, to keep in the key file.
    pub fn with_index(mut self, index: [u8; 32]) -> Self {
        self.index = Some(index);
        self
    }

    /// The store's index key, when the key file holds it: the store need not be asked.
    pub fn index(&self) -> Option<[u8; 32]> {
        self.index
    }

    pub fn current_id(&self) -> &str {
        self.current.id()
    }

    pub fn current_key(&self) -> &DataKey {
        &self.current
    }

    /// Every key id the ring holds, the current one first.
    pub fn ids(&self) -> Vec<String> {
        std::iter::once(&self.current)
            .chain(&self.others)
            .map(|k| k.id.clone())
            .collect()
    }

    fn key(&self, id: &str) -> Option<&DataKey> {
        std::iter::once(&self.current)
            .chain(&self.others)
            .find(|k| k.id == id)
    }

    /// The configured keys, else the key file under `data_dir` (created, with one new key, when
    /// missing).
    pub fn load(config: &StorageConfig, data_dir: &Path) -> Result<(Self, KeySource), SealError> {
        if let Some(current) = config.encryption_key.as_deref().and_then(decode_key) {
            let others = config
                .previous_keys
                .iter()
                .filter_map(|k| decode_key(k))
                .map(DataKey::new)
                .collect();
            return Ok((Self::new(DataKey::new(current), others), KeySource::Configured));
        }
        let path = data_dir.join(KEY_FILE);
        match read_key_file(&path)? {
            Some(ring) => Ok((ring, KeySource::File { path, created: false })),
            None => {
                // Several first runs at once: one key file wins, and every process reads the winner's.
                let created = create_key_file(&path, &Self::new(DataKey::generate(), Vec::new()))?;
                let ring =
                    read_key_file(&path)?.ok_or_else(|| SealError::BadKeyFile(path.display().to_string()))?;
                Ok((ring, KeySource::File { path, created }))
            }
        }
    }

    /// `text` sealed under the current key.
    pub fn seal(&self, text: &str) -> String {
        let key = &self.current;
        // One buffer, encrypted in place: a turn seals a dozen values, and the copies of the
        // allocating API were most of their cost.
        let mut bytes = Vec::with_capacity(NONCE_LEN + text.len() + TAG_LEN);
        // A fresh random nonce per value, from the thread's CSPRNG (seeded from the system once, not a
        // system call per value).
        let nonce = Aes256Gcm::generate_nonce(&mut rand::thread_rng());
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(text.as_bytes());
        // Encryption fails only for messages over 64 GiB.
        let tag = key
            .cipher
            .encrypt_in_place_detached(&nonce, key.label.as_bytes(), &mut bytes[NONCE_LEN..])
            .expect("AES-GCM seals any text under 64 GiB");
        bytes.extend_from_slice(&tag);
        let mut sealed = String::with_capacity(key.label.len() + 1 + bytes.len().div_ceil(3) * 4);
        sealed.push_str(&key.label);
        sealed.push(':');
        B64.encode_string(&bytes, &mut sealed);
        sealed
    }

    /// The text of a value: opened when sealed, as it is when it was written before sealing.
    pub fn open<'a>(&self, text: &'a str) -> Result<Cow<'a, str>, SealError> {
        let Some(rest) = text.strip_prefix(PREFIX) else {
            return Ok(Cow::Borrowed(text));
        };
        let (id, body) = rest.split_once(':').ok_or(SealError::Malformed)?;
        let key = self.key(id).ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let mut bytes = B64.decode(body).map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, rest) = bytes.split_at_mut(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at_mut(rest.len() - TAG_LEN);
        let nonce: [u8; NONCE_LEN] = (*nonce).try_into().map_err(|_| SealError::Malformed)?;
        let tag: [u8; TAG_LEN] = (*tag).try_into().map_err(|_| SealError::Malformed)?;
        key.cipher
            .decrypt_in_place_detached(
                &Nonce::from(nonce),
                key.label.as_bytes(),
                ciphertext,
                &Tag::from(tag),
            )
            .map_err(|_| SealError::Damaged(id.to_owned()))?;
        bytes.truncate(bytes.len() - TAG_LEN);
        bytes.drain(..NONCE_LEN);
        String::from_utf8(bytes)
            .map(Cow::Owned)
            .map_err(|_| SealError::Damaged(id.to_owned()))
    }

    /// A `LIKE` pattern for values sealed under the current key.
    pub fn current_pattern(&self) -> String {
        format!("{PREFIX}{}:%", self.current.id)
    }
}

/// Whether `text` is a sealed value.
pub fn is_sealed(text: &str) -> bool {
    text.starts_with(PREFIX)
}

/// Reads the key file: its first key is the current one, the others are read while a rotation runs.
/// `None` when there is no file.
pub fn read_key_file(path: &Path) -> Result<Option<KeyRing>, SealError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SealError::KeyFile {
                path: path.display().to_string(),
                source,
            });
        }
    };
    let bad = || SealError::BadKeyFile(path.display().to_string());
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let index = match lines.iter().find_map(|l| l.strip_prefix(INDEX_LINE)) {
        Some(k) => Some(decode_key(k).ok_or_else(bad)?),
        None => None,
    };
    let keys: Vec<DataKey> = lines
        .iter()
        .filter(|l| !l.starts_with(INDEX_LINE))
        .map(|l| decode_key(l).map(DataKey::new))
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let mut keys = keys.into_iter();
    let current = keys.next().ok_or_else(bad)?;
    let ring = KeyRing::new(current, keys.collect());
    Ok(Some(match index {
        Some(i) => ring.with_index(i),
        None => ring,
    }))
}

/// Writes the ring as a new key file unless one is there already (a hard link: it never replaces, and
/// the file appears whole). `true` when this call made it.
fn create_key_file(path: &Path, ring: &KeyRing) -> Result<bool, SealError> {
    let tmp = path.with_extension(format!("key.{}.new", std::process::id()));
    write_whole(&tmp, ring)?;
    let made = match std::fs::hard_link(&tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(SealError::KeyFile {
            path: path.display().to_string(),
            source,
        }),
    };
    let _ = std::fs::remove_file(&tmp);
    made
}

/// Writes the ring as the key file, readable by its owner only, replacing the old one at once (a
/// rename), so a process killed meanwhile leaves the old file or the new one, never half of one.
pub fn write_key_file(path: &Path, ring: &KeyRing) -> Result<(), SealError> {
    // A name of this process's own: several first runs may each write the same file at once.
    let tmp = path.with_extension(format!("key.{}.tmp", std::process::id()));
    write_whole(&tmp, ring)?;
    std::fs::rename(&tmp, path).map_err(|source| SealError::KeyFile {
        path: path.display().to_string(),
        source,
    })
}

/// The ring as a key file at `path` (mode 0600), synced.
fn write_whole(path: &Path, ring: &KeyRing) -> Result<(), SealError> {
    let failed = |source| SealError::KeyFile {
        path: path.display().to_string(),
        source,
    };
    let mut text = String::from(
        "# vt-agent data keys (AES-256, base64): the first seals, the others are read during a rotation.\n\
         # Keep this file out of the database's backups: with it, the sealed columns open.\n",
    );
    for key in std::iter::once(&ring.current).chain(&ring.others) {
        text.push_str(&key.to_base64());
        text.push('\n');
    }
    if let Some(index) = ring.index {
        text.push_str("# The store's index key (blind indexes, token fingerprints), written once its values are sealed:\n");
        text.push_str(INDEX_LINE);
        text.push_str(&B64.encode(index));
        text.push('\n');
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}

/// The blind index of a card (its digits): a keyed hash, the same for the same card in every process
/// of one store, useless without the store's index key.
pub fn card_index(digits: &str) -> String {
    vt_domain::vt::secret::card_index(digits)
}

static RING: LazyLock<RwLock<Arc<KeyRing>>> =
    LazyLock::new(|| RwLock::new(Arc::new(KeyRing::new(DataKey::generate(), Vec::new()))));

/// Makes `ring` the one this process seals with. The keys installed before stay readable: a value
/// sealed before (by an in-memory store of the same process) still opens.
pub fn install(ring: KeyRing) {
    let mut installed = RING.write().unwrap_or_else(PoisonError::into_inner);
    let mut merged = ring;
    for key in std::iter::once(&installed.current).chain(&installed.others) {
        if merged.key(&key.id).is_none() {
            merged.others.push(key.clone());
        }
    }
    *installed = Arc::new(merged);
}

/// The ring this process seals and opens with.
pub fn ring() -> Arc<KeyRing> {
    RING.read().unwrap_or_else(PoisonError::into_inner).clone()
}

/// `text` sealed under this process's current key.
pub fn seal(text: &str) -> String {
    ring().seal(text)
}

/// The text of a stored value (see [`KeyRing::open`]).
pub fn open(text: &str) -> Result<String, SealError> {
    ring().open(text).map(Cow::into_owned)
}

/// [`open`] for a column that may be NULL.
pub fn open_opt(text: Option<String>) -> Result<Option<String>, SealError> {
    text.map(|t| open(&t)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_under_its_key_only() {
        let one = KeyRing::new(DataKey::generate(), Vec::new());
        let sealed = one.seal("cartão 1234567890");
        assert!(is_sealed(&sealed) && !sealed.contains("1234567890"), "{sealed}");
        assert!(sealed.starts_with(&format!("v1:{}:", one.current_id())));
        assert_eq!(one.open(&sealed).expect("open"), "cartão 1234567890");
        assert_ne!(one.seal("x"), one.seal("x"), "a fresh nonce each time");
        let other = KeyRing::new(DataKey::generate(), Vec::new());
        let err = other.open(&sealed).expect_err("another key").to_string();
        assert!(err.contains(one.current_id()), "the error names the key: {err}");
        let rotated = KeyRing::new(DataKey::generate(), vec![one.current.clone()]);
        assert_eq!(rotated.open(&sealed).expect("an older key"), "cartão 1234567890");
        assert!(sealed.starts_with(one.current_pattern().trim_end_matches('%')));
        assert_eq!(one.open("{\"antigo\": 1}").expect("clear"), "{\"antigo\": 1}");
        let mut damaged = sealed.clone();
        damaged.pop();
        damaged.push('A');
        assert!(one.open(&damaged).is_err());
    }

    #[test]
    fn the_key_file_is_made_once_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().expect("tmp");
        let (ring, source) = KeyRing::load(&StorageConfig::default(), dir.path()).expect("made");
        let path = dir.path().join(KEY_FILE);
        assert_eq!(
            source,
            KeySource::File {
                path: path.clone(),
                created: true
            }
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (again, source) = KeyRing::load(&StorageConfig::default(), dir.path()).expect("read");
        assert_eq!(again.current_id(), ring.current_id());
        assert!(matches!(source, KeySource::File { created: false, .. }));
        assert_eq!(
            again.index(),
            None,
            "no index key until the store's values are sealed"
        );
        write_key_file(&path, &again.clone().with_index([9u8; 32])).expect("write");
        let kept = read_key_file(&path).expect("read").expect("there");
        assert_eq!((kept.index(), kept.ids()), (Some([9u8; 32]), again.ids()));
        std::fs::write(&path, "não é uma chave\n").expect("write");
        assert!(KeyRing::load(&StorageConfig::default(), dir.path()).is_err());
    }

    #[test]
    fn configured_keys_are_checked_and_win() {
        let key = B64.encode([7u8; 32]);
        let config = StorageConfig {
            encryption_key: Some(key),
            previous_keys: vec!["curta".into()],
        };
        let err = config.validate().expect_err("bad previous key");
        assert_eq!(err.0, "storage.previous_keys[0]");
        let dir = tempfile::tempdir().expect("tmp");
        let ok = StorageConfig {
            previous_keys: Vec::new(),
            ..config
        };
        let (ring, source) = KeyRing::load(&ok, dir.path()).expect("configured");
        assert_eq!(source, KeySource::Configured);
        assert_eq!(ring.current_id(), DataKey::new([7u8; 32]).id());
        assert!(!dir.path().join(KEY_FILE).exists());
    }
}
