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
        page == vt_agent::testkit::config_reference(),
        "{REFERENCE_PAGE} is not what the types say: run `cargo run -q -- config reference > {REFERENCE_PAGE}`"
    );
}

#[test]
fn the_books_openapi_document_is_what_the_handlers_generate() {
    const PAGE: &str = "docs/src/integrator/openapi.json";
    let page = std::fs::read_to_string(root().join(PAGE)).expect("the OpenAPI copy");
    let generated = vt_contract::json::to_pretty(&vt_agent::openapi()).expect("json") + "\n";
    assert!(
        page == generated,
        "{PAGE} is not what the handlers say: run `cargo run -q -- openapi > {PAGE}`"
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
    let reference: BTreeSet<String> = vt_agent::testkit::config_key_paths()
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

/// The Markdown files a reader follows links through: the README and every page of the book.
fn pages() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    crate::layers::files_ending(&root().join("docs/src"), "md", &mut out);
    out.sort();
    out
}

/// `text` without fenced code blocks and inline code spans (what they hold is not a link).
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for c in line.chars() {
            if c == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// The link targets of `text`: `[words](target)`.
fn links(text: &str) -> Vec<String> {
    let text = prose(text);
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| rest[..end].trim().to_owned())
        })
        .collect()
}

/// The files `{{#include path}}` pulls into `file`.
fn includes(file: &Path, text: &str) -> Vec<PathBuf> {
    text.match_indices("{{#include ")
        .filter_map(|(at, _)| {
            let rest = &text[at + "{{#include ".len()..];
            rest.find("}}")
                .map(|end| file.parent().expect("dir").join(rest[..end].trim()))
        })
        .collect()
}

/// A heading's anchor as mdBook and GitHub make it: lower case, spaces to `-`, punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of `file`'s headings, those of the files it includes too.
fn anchors(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut out: BTreeSet<String> = prose(&text)
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect();
    for included in includes(file, &text) {
        out.extend(anchors(&included));
    }
    out
}

/// Every link of the README and the book resolves, offline: a page, a file of the repository, a
/// heading of the page it names. (`mdbook build` in CI renders the same pages.)
#[test]
fn every_link_of_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        for included in includes(&page, &text) {
            if !included.is_file() {
                broken.push(format!("{}: includes {}", page.display(), included.display()));
            }
        }
        for target in links(&text) {
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|p| target.starts_with(p))
            {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("dir").join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
            } else if !anchor.is_empty() && !anchors(&file).contains(anchor) {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every page of the book is in its table of contents (mdBook renders only what SUMMARY.md lists).
#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).expect("SUMMARY.md");
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    let src = root().join("docs/src");
    let missing: Vec<String> = pages()
        .iter()
        .filter_map(|p| p.strip_prefix(&src).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p != "SUMMARY.md" && !listed.contains(p))
        .collect();
    assert!(missing.is_empty(), "pages SUMMARY.md does not list: {missing:?}");
}

/// Every `VT_*` variable the product reads (the configuration's, the channels' own, the simulator's
/// command) is documented in the configuration chapter, the reference or the commands.
#[test]
fn every_environment_variable_the_product_reads_is_documented() {
    let mut files = Vec::new();
    crate::layers::rust_files(&root().join("src"), &mut files);
    let docs = [
        "docs/src/operator/configuration.md",
        "docs/src/operator/commands.md",
        REFERENCE_PAGE,
    ]
    .iter()
    .map(|p| std::fs::read_to_string(root().join(p)).expect("page"))
    .collect::<String>();
    let mut undocumented = BTreeSet::new();
    for file in files {
        let code = std::fs::read_to_string(&file).expect("source");
        for (at, _) in code.match_indices("\"VT_") {
            let name: String = code[at + 1..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.ends_with('_') && !docs.contains(&name) {
                undocumented.insert(name);
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "VT_* variables the book does not name: {undocumented:?}"
    );
}

/// The README is a front page: what it is, the two commands, a tour, the way into the book.
#[test]
fn the_readme_stays_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move the detail into a chapter of docs/"
    );
    for command in [
        "cargo run -- run-flow examples/recarga-saldo-baixo.json",
        "cargo test --workspace",
    ] {
        assert!(readme.contains(command), "the README lost the command {command}");
    }
}

#[test]
fn the_link_reader_skips_code_and_finds_anchors() {
    let found = links("see [a](a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](#here)");
    assert_eq!(found, vec!["a.md#x".to_owned(), "#here".to_owned()]);
    assert_eq!(
        slug(" Paying by Pix: the journey, as it goes"),
        "paying-by-pix-the-journey-as-it-goes"
    );
}
