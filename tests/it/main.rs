//! The one integration-test binary: the engine's acceptance paths, the providers against wire fakes,
//! and the shipped skills. Shared helpers live in `support`.
#![allow(clippy::disallowed_methods)] // tests and benches convert JSON freely; see `vt_contract::json`

mod automatico;
mod batch;
mod board;
mod boleto;
mod browser;
mod bursts;
mod cartao;
mod cases;
mod cli;
mod console;
mod conversation;
mod docs;
mod engine;
mod faq;
mod flow;
mod followups;
mod http;
mod layers;
mod mattermost;
mod outcomes;
mod photos;
mod pipeline;
mod pix;
mod plug;
mod processes;
mod replay;
mod providers;
mod router;
mod safety;
mod service;
mod store;
mod teams;
mod support;
mod systems_auth;
mod systems_contract;
mod systems_tls;
mod traces;
mod transcripts;
mod voice;
mod webchat;
mod webhooks;
mod whatsapp;
mod window;
