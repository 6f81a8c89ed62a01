//! The quality tools: what tells an operator whether a build (or a model) answers people well, before
//! it serves them — `vt-agent test` runs transcripts ([`transcripts`]), `vt-agent eval` scores the
//! corpus and the eval cases with a model, K times, and without ([`eval`]), `vt-agent replay` plays a
//! recorded day against a candidate build ([`replay`]). They build the product as `serve` does (the
//! composition root, `crate::app`) and drive it; nothing in the product imports them.

pub(crate) mod eval;
pub(crate) mod replay;
pub(crate) mod transcripts;
