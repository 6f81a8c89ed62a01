//! The book (`docs/`) and the README stay true: the configuration reference is the types' own, the
//! example file names the same keys, every link of the book and the README resolves, and the README
//! stays a short front page.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

const REFERENCE_PAGE: &str = "docs/src/operator/configuration-reference.md";

#[test]
fn the_books_configuration_reference_is_generated_from_the_types() {
    let page = std::fs::read_to_string(root().join(REFERENCE_PAGE)).expect("the reference page");
    assert!(
        page == vt_agent::config::reference::markdown(),
        "{REFERENCE_PAGE} is not what the types say: run `cargo run -q -- config reference > {REFERENCE_PAGE}`"
    );
}

/// The `section.key` paths `examples/vt-agent.toml` names, commented or not; a map's entry
/// (`[custos.modelos."gpt-5-mini"]`) as `"NOME"`.
fn example_keys() -> BTreeSet<String> {
    example_keys_in(&std::fs::read_to_string(root().join("examples/vt-agent.toml")).expect("example"))
}

/// One system's own sections (`[systems.saldo.auth]`) stand for the three's.
fn one_system(key: &str) -> String {
    ["saldo", "recarga", "notificacao"]
        .iter()
        .fold(key.to_owned(), |k, s| {
            k.replace(&format!("systems.{s}."), "systems.SISTEMA.")
        })
}

fn example_keys_in(text: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        let line = line.trim_start_matches('#').trim();
        let line = line.split(" #").next().unwrap_or_default().trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_start_matches('[');
            let Some(end) = header.find(']') else { continue };
            let name = &header[..end];
            if name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.\"-".contains(c))
            {
                section = match name.split_once('"') {
                    Some((map, _)) => format!("{map}\"NOME\""),
                    None => name.to_owned(),
                };
            }
            continue;
        }
        let Some((key, _)) = line.split_once(" = ") else {
            continue;
        };
        if key.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !key.is_empty() {
            keys.insert(one_system(&if section.is_empty() {
                key.to_owned()
            } else {
                format!("{section}.{key}")
            }));
        }
    }
    keys
}

#[test]
fn the_example_file_names_only_keys_of_the_reference_and_every_section() {
    let reference: BTreeSet<String> = vt_agent::config::reference::key_paths()
        .iter()
        .map(|k| one_system(k))
        .collect();
    let example = example_keys();
    let section_of = |k: &String| k.rsplit_once('.').map_or(String::new(), |(s, _)| s.to_owned());
    let sections: BTreeSet<String> = reference.iter().map(section_of).collect();
    // A key is known when the reference has it, has a table of values above it (`[custos.whatsapp]
    // marketing`), or has it as a section written inline (`validacoes_cartao = { … }`).
    let known = |key: &String| {
        reference.contains(key)
            || sections.contains(key)
            || key
                .match_indices('.')
                .any(|(at, _)| reference.contains(&key[..at]))
    };
    let unknown: Vec<&String> = example.iter().filter(|k| !known(k)).collect();
    assert!(
        unknown.is_empty(),
        "examples/vt-agent.toml names keys the types do not have: {unknown:#?}"
    );
    // A section is shown by one of its keys, or written inline as a key of the section above.
    let shown: BTreeSet<String> = example
        .iter()
        .map(section_of)
        .chain(example.iter().cloned())
        .collect();
    let missing: Vec<&String> = sections.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "sections the example file does not show: {missing:#?}"
    );
}

/// The check reads commented lines, sections and inline tables as a reader of the file does.
#[test]
fn the_example_reader_sees_commented_keys_and_sections() {
    let keys = example_keys_in(
        "data_dir = \"data\"   # here\n# [systems.saldo.auth]   # [not.this]\n# kind = \"header\"\n\
         # Asked in order when = prose\n[custos.modelos.\"gpt-5-mini\"]\nentrada = 1\n",
    );
    let expected: BTreeSet<String> = [
        "data_dir",
        "systems.SISTEMA.auth.kind",
        "custos.modelos.\"NOME\".entrada",
    ]
    .iter()
    .map(|k| (*k).to_owned())
    .collect();
    assert_eq!(keys, expected);
}
