//! The crate's shape, read from its source: the modules form a strict stack (an import only ever
//! reaches a module on a lower floor), and inside a module no import cycle ties more than two files.
//! `cargo test --test it layers` is how a reader checks it; ARCHITECTURE.md draws the same floors.
//!
//! Imports are read as text: every `crate::…` path (in `use` lines, in code and in intra-doc links)
//! and every `super::…` path, resolved to the file that defines the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, top first. A module may import only modules on lower floors; modules on one floor never
/// import each other.
const FLOORS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["quality"],
    &["app"],
    &["config"],
    &["http"],
    &["channels", "batch"],
    &["service", "runs"],
    &[
        "router",
        "planner",
        "flow",
        "outbox",
        "retention",
        "usage",
        "transcript",
    ],
    &["store"],
    &["ocr", "costs"],
];

fn floor_of(module: &str) -> usize {
    FLOORS
        .iter()
        .position(|f| f.contains(&module))
        .unwrap_or_else(|| panic!("module {module} is on no floor: add it to FLOORS and to ARCHITECTURE.md"))
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    files_ending(dir, "rs", out);
}

/// Every file under `dir` whose extension is `ext`.
pub(crate) fn files_ending(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .expect("read a folder")
        .filter_map(Result::ok)
    {
        let path = entry.path();
        if path.is_dir() {
            files_ending(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

/// A file's module path: `src/http/console/pages.rs` → `["http", "console", "pages"]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file that defines the longest prefix of `path` that is a module of this crate.
fn file_of(modules: &BTreeMap<Vec<String>, PathBuf>, path: &[String]) -> Option<PathBuf> {
    (1..=path.len())
        .rev()
        .find_map(|n| modules.get(&path[..n]).cloned())
}

/// The `crate::…` and `super::…` paths a file names, as module paths; a group (`crate::{a, b::c}`)
/// names each of its paths.
fn named_paths(text: &str, own: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for (start, _) in text.match_indices("crate::").chain(text.match_indices("super::")) {
        if text[..start].ends_with(|c: char| is_ident(c) || c == ':') {
            continue;
        }
        for segments in paths_at(&text[start..]) {
            let mut segments = segments.into_iter().peekable();
            let mut path: Vec<String> = if segments.next().as_deref() == Some("crate") {
                Vec::new()
            } else {
                // `super` in `a/b.rs` and in `a/b/mod.rs` (both module a::b) is `a`.
                own[..own.len().saturating_sub(1)].to_vec()
            };
            while segments.peek().map(String::as_str) == Some("super") {
                path.pop();
                segments.next();
            }
            path.extend(segments);
            found.push(path);
        }
    }
    found
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths written at the start of `text`: `a::b::c` is one, `a::{b, c::d}` two.
fn paths_at(text: &str) -> Vec<Vec<String>> {
    if let Some(group) = text.strip_prefix('{') {
        let mut depth = 0;
        let mut items = Vec::new();
        let mut from = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    items.push(&group[from..i]);
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    items.push(&group[from..i]);
                    from = i + 1;
                }
                _ => {}
            }
        }
        return items.iter().flat_map(|item| paths_at(item.trim())).collect();
    }
    let name: String = text.chars().take_while(|c| is_ident(*c)).collect();
    if name.is_empty() {
        return vec![Vec::new()];
    }
    match text[name.len()..].strip_prefix("::") {
        Some(rest) => paths_at(rest)
            .into_iter()
            .map(|mut tail| {
                tail.insert(0, name.clone());
                tail
            })
            .collect(),
        None => vec![vec![name]],
    }
}

struct Graph {
    src: PathBuf,
    /// File → the files it imports (other than itself).
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

fn graph() -> Graph {
    graph_of(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

/// The source folders of the workspace's crates: the binary's, then each of `crates/`.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs = vec![root.join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .filter_map(Result::ok)
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    dirs.extend(crates);
    dirs
}

fn graph_of(src: PathBuf) -> Graph {
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let modules: BTreeMap<Vec<String>, PathBuf> =
        files.iter().map(|f| (module_of(&src, f), f.clone())).collect();
    let mut edges = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        // A file's unit tests (its last item, by the house style) import what they test.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let own = module_of(&src, file);
        let targets: BTreeSet<PathBuf> = named_paths(text, &own)
            .iter()
            .filter_map(|p| file_of(&modules, p))
            .filter(|t| t != file)
            .collect();
        edges.insert(file.clone(), targets);
    }
    Graph { src, edges }
}

fn top_module(src: &Path, file: &Path) -> String {
    module_of(src, file)
        .first()
        .cloned()
        .unwrap_or_else(|| "lib".into())
}

#[test]
fn every_import_reaches_a_lower_floor() {
    let g = graph();
    let mut up = Vec::new();
    for (from, targets) in &g.edges {
        let from_top = top_module(&g.src, from);
        if from_top == "lib" || from_top == "testkit" {
            continue;
        }
        for to in targets {
            let to_top = top_module(&g.src, to);
            if to_top == from_top || to_top == "lib" {
                continue;
            }
            if floor_of(&to_top) <= floor_of(&from_top) {
                up.push(format!("{} -> {}", from.display(), to.display()));
            }
        }
    }
    assert!(
        up.is_empty(),
        "imports that do not go down the stack:\n{}",
        up.join("\n")
    );
}

#[test]
fn no_import_cycle_ties_more_than_two_files() {
    let dirs = crate_sources();
    assert!(dirs.len() >= 5, "the workspace's crates: {dirs:?}");
    let cycles: Vec<String> = dirs
        .into_iter()
        .flat_map(|src| cycles_in(&graph_of(src)))
        .collect();
    assert!(
        cycles.is_empty(),
        "import cycles of more than two files:\n{}",
        cycles.join("\n")
    );
}

/// The circles of more than two files in one crate, each as its files.
fn cycles_in(g: &Graph) -> Vec<String> {
    let files: Vec<&PathBuf> = g.edges.keys().collect();
    // Reachability by depth-first search from each file (the crate has ~120 files).
    let reach = |start: &PathBuf| -> BTreeSet<PathBuf> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start.clone()];
        while let Some(f) = stack.pop() {
            for t in g.edges.get(&f).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    stack.push(t.clone());
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = files.iter().map(|f| (*f, reach(f))).collect();
    let mut cycles = BTreeSet::new();
    for f in &files {
        let circle: BTreeSet<&PathBuf> = files
            .iter()
            .copied()
            .filter(|o| reachable[f].contains(*o) && reachable[o].contains(*f))
            .collect();
        if circle.len() > 2 {
            cycles.insert(
                circle
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            );
        }
    }
    cycles.into_iter().collect()
}

/// The check itself sees what it must: an import that runs back up is found.
#[test]
fn the_reader_finds_paths_in_use_lines_code_and_docs() {
    let own = vec!["http".to_owned(), "console".to_owned(), "pages".to_owned()];
    let text = "use crate::app::CHAT_AGENT;\nlet x = crate::store::seal::seal(y);\n/// [`crate::engine::Engine`]\nuse crate::{llm::ChatMessage, service::{self, Inbound}};\nuse super::render;\nuse super::super::state::AppState;";
    let found = named_paths(text, &own);
    assert_eq!(
        found,
        vec![
            vec!["app".to_owned(), "CHAT_AGENT".to_owned()],
            vec!["store".to_owned(), "seal".to_owned(), "seal".to_owned()],
            vec!["engine".to_owned(), "Engine".to_owned()],
            vec!["llm".to_owned(), "ChatMessage".to_owned()],
            vec!["service".to_owned(), "self".to_owned()],
            vec!["service".to_owned(), "Inbound".to_owned()],
            vec!["http".to_owned(), "console".to_owned(), "render".to_owned()],
            vec!["http".to_owned(), "state".to_owned(), "AppState".to_owned()],
        ]
    );
    assert!(floor_of("app") < floor_of("http"), "app is above http");
}

/// Whether ARCHITECTURE.md names `name` (a file as `x.rs`, a folder as `x/`), standing on its own or
/// at the end of a path (`sqlite/group.rs`).
fn named_in(doc: &str, name: &str) -> bool {
    doc.match_indices(name).any(|(at, _)| {
        let before = doc[..at].chars().next_back();
        let after = doc[at + name.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn the_codemap_is_short_and_names_every_module_and_every_test_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    // Short enough to be read whole and kept true: figures go to BENCHMARKS.md, details to the modules
    // and each crate's `lib.rs`. Held by a width, not by widening lines.
    let lines = doc.lines().count();
    assert!(lines <= 420, "ARCHITECTURE.md has {lines} lines; keep it to 420");
    let wide: Vec<&str> = doc.lines().filter(|l| l.chars().count() > 120).collect();
    assert!(
        wide.is_empty(),
        "ARCHITECTURE.md's lines over 120 characters: {wide:#?}"
    );
    let mut missing = Vec::new();
    for src in crate_sources() {
        let dir = src.strip_prefix(root).expect("in the repo").display().to_string();
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        for file in files {
            let rel = file.strip_prefix(&src).expect("under src");
            let name = match rel.file_name().and_then(|n| n.to_str()) {
                Some("main.rs" | "lib.rs") if rel.parent() == Some(Path::new("")) => continue,
                Some("mod.rs") => format!(
                    "{}/",
                    rel.parent()
                        .and_then(Path::file_name)
                        .expect("a folder")
                        .to_string_lossy()
                ),
                Some(n) => n.to_owned(),
                None => continue,
            };
            // A folder's `mod.rs` is named as the folder (`engine/`) or as itself (`turn/mod.rs`).
            let named =
                named_in(&doc, &name) || name.ends_with('/') && named_in(&doc, &format!("{name}mod.rs"));
            if !named {
                missing.push(format!("{dir}/{}", rel.display()));
            }
        }
    }
    for entry in std::fs::read_dir(root.join("tests/it"))
        .expect("tests/it")
        .filter_map(Result::ok)
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name != "main.rs" && !named_in(&doc, &name) {
            missing.push(format!("tests/it/{name}"));
        }
    }
    missing.sort();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md's codemap does not name: {missing:#?}"
    );
}

/// A service hands out no store: readers are given the narrow trait they read (`store::Stores`), and
/// every write with a rule goes through the job service that keeps it.
#[test]
fn no_service_hands_out_its_store() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/service");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let handing_out: Vec<_> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .expect("read")
                .lines()
                .any(|l| l.trim_start().starts_with("pub fn store(") || l.contains("pub fn store(&self)"))
        })
        .collect();
    assert!(handing_out.is_empty(), "a public store() in {handing_out:?}");
}

/// A job is a room: it borrows the parts it uses (its store, its settings, the engine when it runs
/// turns, the shared rooms), never the whole service — no `Deref` to a core, no field holding
/// `Services`.
#[test]
fn no_job_derefs_to_a_core() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/service");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in text.lines().enumerate() {
            if line.contains("Deref for") || line.contains("ops::Deref") {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    let jobs = std::fs::read_to_string(src.join("jobs.rs")).expect("jobs.rs");
    let mut structs = 0;
    for item in jobs.split("\npub").skip(1) {
        let Some(body) = item
            .strip_prefix(" struct ")
            .or_else(|| item.strip_prefix("(crate) struct "))
        else {
            continue;
        };
        structs += 1;
        let fields = body
            .split_once('{')
            .map_or("", |(_, f)| f.split_once("\n}").map_or(f, |(f, _)| f));
        if fields.contains("Services") {
            found.push(format!(
                "jobs.rs: {} holds the whole service",
                body.split('<').next().unwrap_or(body)
            ));
        }
    }
    assert!(structs >= 8, "jobs.rs declares {structs} jobs and rooms");
    assert!(found.is_empty(), "jobs that reach a core:\n{}", found.join("\n"));
}

/// The channels' names as the crate declares them: every `…CHANNEL: &str = "name"` and the terminal's.
fn channel_names(files: &[PathBuf]) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("read");
        for line in text.lines() {
            let declared = line
                .split_once("CHANNEL: &str = \"")
                .or_else(|| line.split_once("TERMINAL: &str = \""));
            if let Some((_, rest)) = declared {
                names.extend(rest.split('"').next().map(str::to_owned));
            }
        }
    }
    names
}

/// The service asks a conversation's channel for its rules (`service::ChannelRules`, declared by the
/// channel), never its name: no channel's name is written in `src/service/`.
#[test]
fn no_channel_name_in_the_service() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    // The terminal's name is the engine's (a turn started in a terminal), the others their channels'.
    rust_files(&root.join("src"), &mut all);
    rust_files(&root.join("crates/engine/src"), &mut all);
    let names = channel_names(&all);
    for expected in ["whatsapp", "mattermost", "webchat", "http", "terminal", "api"] {
        assert!(
            names.contains(expected),
            "the channel {expected} is not declared where the check looks"
        );
    }
    let mut service = Vec::new();
    rust_files(&root.join("src/service"), &mut service);
    let mut found = Vec::new();
    for file in &service {
        let text = std::fs::read_to_string(file).expect("read");
        for (n, line) in text.lines().enumerate() {
            for name in &names {
                if line.contains(&format!("\"{name}\"")) {
                    found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "channel names in src/service:\n{}",
        found.join("\n")
    );
}

/// The names `lib.rs` exports: every `pub use` tree flattened to the name it binds (an alias, or the
/// path's last segment).
fn facade_names(lib: &str) -> Vec<String> {
    let mut names = Vec::new();
    for statement in lib.split(';') {
        let Some((_, tree)) = statement.split_once("pub use ") else {
            continue;
        };
        let leaves = tree
            .split_once('{')
            .map_or(tree, |(_, inner)| inner.trim_end_matches('}'));
        for leaf in leaves.split(',').map(str::trim).filter(|l| !l.is_empty()) {
            let bound = leaf.rsplit_once(" as ").map_or(leaf, |(_, alias)| alias);
            names.extend(bound.rsplit("::").next().map(|n| n.trim().to_owned()));
        }
    }
    names
}

/// The identifiers other targets name through the crate: every `vt_agent::` path, and every name of
/// a `use vt_agent::{…}` tree.
fn named_through_the_crate(text: &str) -> BTreeSet<String> {
    let mut named = BTreeSet::new();
    for (at, prefix) in text.match_indices("vt_agent::") {
        let rest = &text[at + prefix.len()..];
        let rest = rest.strip_prefix("testkit::").unwrap_or(rest);
        let end = if rest.starts_with('{') {
            let mut depth = 0;
            rest.char_indices()
                .find_map(|(i, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    (depth == 0).then_some(i + 1)
                })
                .unwrap_or(rest.len())
        } else {
            rest.find(|c: char| !is_ident(c) && c != ':')
                .unwrap_or(rest.len())
        };
        named.extend(
            rest[..end]
                .split(|c: char| !is_ident(c))
                .filter(|w| !w.is_empty())
                .map(str::to_owned),
        );
    }
    named
}

/// `lib.rs` is a façade: private modules and the re-exports `main`, the tests, the benches and the
/// examples use — nothing else is `pub` there (so `unreachable_pub` finds what no other crate can
/// reach), and every exported name is used by one of them.
#[test]
fn lib_rs_is_a_facade_of_what_other_targets_use() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("lib.rs");
    let testkit = std::fs::read_to_string(root.join("src/testkit.rs")).expect("testkit.rs");
    let public: Vec<&str> = lib
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("pub ") && !l.starts_with("pub use ") && *l != "pub mod testkit;")
        .collect();
    assert!(
        public.is_empty(),
        "lib.rs makes public more than re-exports and the testkit: {public:?}"
    );
    let kit_public: Vec<&str> = testkit
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("pub ") && !l.starts_with("pub use crate::"))
        .collect();
    assert!(
        kit_public.is_empty(),
        "testkit.rs only re-exports: {kit_public:?}"
    );
    let mut outside = Vec::new();
    for dir in ["tests", "benches", "examples"] {
        rust_files(&root.join(dir), &mut outside);
    }
    outside.push(root.join("src/main.rs"));
    let text: String = outside
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("read"))
        .collect();
    // The product's face is what `main`, an embedder and the product-level tests need; white-box
    // hooks are under `testkit`.
    let face = facade_names(&lib);
    assert!(
        (30..=60).contains(&face.len()),
        "the face exports {} names (30 to 60): {face:?}",
        face.len()
    );
    let names: Vec<String> = face.into_iter().chain(facade_names(&testkit)).collect();
    // Only what another target names through the crate counts as used: a common word such as
    // `run` or `seal` written elsewhere in a test says nothing.
    let named = named_through_the_crate(&text);
    let unused: Vec<_> = names.iter().filter(|name| !named.contains(*name)).collect();
    assert!(
        unused.is_empty(),
        "lib.rs and testkit.rs export names no other target uses: {unused:?}"
    );
}

/// `lib.rs` lists the modules in the floors' order, so the crate's front page reads as the drawing.
#[test]
fn lib_rs_lists_the_modules_in_the_floors_order() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).expect("lib.rs");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';'))
        // The testkit is no floor: it re-exports from them, for the tests.
        .filter(|m| *m != "testkit")
        .collect();
    assert!(modules.len() > 10, "lib.rs declares {modules:?}");
    let floors: Vec<usize> = modules.iter().map(|m| floor_of(m)).collect();
    assert!(
        floors.windows(2).all(|w| w[0] <= w[1]),
        "lib.rs's modules are not in the floors' order: {modules:?}"
    );
}

/// The workspace's crates and the crates of it each may depend on, bottom first: the graph
/// ARCHITECTURE.md draws. A crate opens knowing what it may touch.
const CRATES: &[(&str, &[&str])] = &[
    ("vt-contract", &[]),
    ("vt-domain", &["vt-contract"]),
    ("vt-connectors", &["vt-contract", "vt-domain"]),
    ("vt-simulators", &["vt-contract", "vt-domain", "vt-connectors"]),
    ("vt-engine", &["vt-contract", "vt-domain", "vt-connectors"]),
    ("vt-store", &["vt-contract", "vt-domain", "vt-engine"]),
    (
        "vt-agent",
        &[
            "vt-contract",
            "vt-domain",
            "vt-connectors",
            "vt-simulators",
            "vt-engine",
            "vt-store",
        ],
    ),
];

/// Only these serve HTTP, so only these may depend on a server framework.
const SERVING: &[&str] = &["vt-simulators", "vt-agent"];

/// A manifest's package name and the names of its `[dependencies]`.
fn manifest(path: &Path) -> (String, BTreeSet<String>) {
    let text = std::fs::read_to_string(path).expect("Cargo.toml");
    let doc: toml::Table = toml::from_str(&text).expect("a manifest");
    let name = doc["package"]["name"].as_str().expect("a name").to_owned();
    let deps = doc
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default();
    (name, deps)
}

#[test]
fn the_crates_depend_as_drawn_and_only_servers_on_axum() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    for (name, deps) in CRATES {
        // The drawing is an indented block: a line per crate, `name ← what it depends on`.
        let drawn = architecture
            .lines()
            .filter(|l| l.starts_with("    "))
            .find_map(|l| {
                let (head, tail) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
                (head == *name).then(|| tail.trim().trim_start_matches('←').trim().to_owned())
            });
        assert_eq!(
            drawn.as_deref(),
            Some(deps.join(", ").as_str()),
            "ARCHITECTURE.md draws {name} with a line `{name} ← {}`",
            deps.join(", ")
        );
    }
    let manifests = crate_sources()
        .iter()
        .map(|src| manifest(&src.parent().expect("a crate").join("Cargo.toml")))
        .collect::<Vec<_>>();
    assert_eq!(manifests.len(), CRATES.len(), "every crate is in the drawing");
    for (name, deps) in &manifests {
        let (_, allowed) = CRATES
            .iter()
            .find(|(c, _)| c == name)
            .unwrap_or_else(|| panic!("{name} is not in the drawing"));
        let own: BTreeSet<&str> = deps
            .iter()
            .map(String::as_str)
            .filter(|d| d.starts_with("vt-"))
            .collect();
        assert_eq!(own, allowed.iter().copied().collect(), "{name}'s crates");
        assert_eq!(
            deps.contains("axum"),
            SERVING.contains(&name.as_str()),
            "{name} and axum: only {SERVING:?} serve HTTP"
        );
    }
}
