//! Link flags for the `vt-agent` binary and the examples; the router's intent classifier, trained
//! from the corpus.

#[path = "src/router/classifier/augment.rs"]
#[allow(dead_code, unreachable_pub)]
mod augment;
#[path = "src/router/classifier/files.rs"]
mod files;
#[path = "src/router/classifier/features.rs"]
#[allow(dead_code, unreachable_pub)]
mod features;
#[path = "build/intents.rs"]
mod intents;

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        // Relative relocations packed (DT_RELR, glibc ≥ 2.36): the dynamic loader reads 28 KB instead
        // of 1.8 MB of `.rela.dyn` at every start, and the binary stays position-independent (ASLR
        // kept, unlike `-no-pie`). Interleaved: `--version` 2.79 → 2.61 ms, `run-flow` 11.9 → 11.1 ms.
        // A GNU ld older than 2.38 ignores the flag with a warning.
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // The same for the examples: `peer_bench` measures the engine as the binary ships, and its
        // peak RSS counted 0.6 MB of `.rela.dyn` pages the loader read once.
        println!("cargo:rustc-link-arg-examples=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
    // `sqlx::migrate!` embeds the migrations: a new file must rebuild the crate.
    println!("cargo:rerun-if-changed=migrations");
    // The intent classifier: trained from the corpus, embedded in the binary.
    println!("cargo:rerun-if-changed=corpus/intencoes/treino");
    println!("cargo:rerun-if-changed=src/router/classifier/features.rs");
    println!("cargo:rerun-if-changed=src/router/classifier/augment.rs");
    println!("cargo:rerun-if-changed=build/intents.rs");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let corpus = files::read(&root.join("corpus/intencoes/treino"));
    intents::train(&corpus, &out.join("intencoes.bin"));
}
