//! The one integration-test binary: the engine's acceptance paths, the providers against wire fakes,
//! and the shipped skills. Shared helpers live in `support`.

mod cli;
mod engine;
mod flow;
mod providers;
mod service;
mod store;
mod support;
