//! A turn's expectations and the transcript's `never` rules, checked against what the turn did
//! ([`Observed`]). A failure is `(what, expected, actual)`.

use serde_json::{Map, Value};
use vt_domain::tools::user_confirms;
use vt_domain::vt::card::mask_cards_in;
use vt_simulators::systems::LedgerEntry;

use super::world::Observed;
use crate::transcript::format::{Expect, ExpectCall, ExpectRequest, Never, Turn};
use vt_engine::TurnEvent;

pub(super) type Failure = (String, String, String);

pub(super) fn fail<T: std::fmt::Debug, U: std::fmt::Debug>(what: &str, expected: T, actual: U) -> Failure {
    (what.to_owned(), format!("{expected:?}"), format!("{actual:?}"))
}

/// `actual` contains every field of `want` with the same value (recursively for objects).
fn partial_match(want: &Value, actual: &Value) -> bool {
    match (want, actual) {
        (Value::Object(w), Value::Object(a)) => w
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|av| partial_match(v, av))),
        (Value::Number(w), Value::Number(a)) => w.as_f64() == a.as_f64(),
        (Value::Number(w), Value::String(a)) | (Value::String(a), Value::Number(w)) => {
            a.parse::<f64>().ok() == w.as_f64()
        }
        _ => want == actual,
    }
}

fn call_matches(want: &ExpectCall, name: &str, args: &Value) -> bool {
    if want.name != name {
        return false;
    }
    if let Some(w) = &want.arguments
        && !partial_match(w, args)
    {
        return false;
    }
    if let Some(exact) = &want.arguments_exact {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                for k in &want.ignore {
                    o.remove(k);
                }
            }
            v
        };
        return strip(exact) == strip(args);
    }
    true
}

/// Every expectation of a turn, in the order a reader finds them in the file.
pub(super) fn check(expect: &Expect, seen: &Observed) -> Result<(), Failure> {
    if let Some(want) = &expect.intent
        && seen.handled.intent.as_deref() != Some(want.as_str())
    {
        return Err(fail("intent", want, &seen.handled.intent));
    }
    check_calls(expect, &seen.events)?;
    check_reply(expect, &seen.reply, &seen.replies)?;
    check_events(expect, &seen.events)?;
    for r in &expect.requests {
        check_request(r, &seen.ledger)?;
    }
    check_ledger(expect, &seen.ledger)?;
    check_maps(expect, seen.conversation.as_ref())?;
    check_counts(expect, seen)
}

/// The model's tool calls (deterministic steps left out), with their arguments parsed.
fn model_calls(events: &[TurnEvent]) -> Vec<(String, Value)> {
    events
        .iter()
        .filter_map(TurnEvent::model_tool_call)
        .map(|(name, arguments)| {
            let parsed =
                vt_contract::json::from_text(arguments).unwrap_or(Value::String(arguments.to_owned()));
            (name.to_owned(), parsed)
        })
        .collect()
}

fn check_calls(expect: &Expect, events: &[TurnEvent]) -> Result<(), Failure> {
    let calls = model_calls(events);
    if let Some(want) = &expect.tool_calls {
        let names: Vec<String> = calls.iter().map(|(n, a)| format!("{n}({a})")).collect();
        let ok =
            want.len() == calls.len() && want.iter().zip(&calls).all(|(w, (n, a))| call_matches(w, n, a));
        if !ok {
            let wanted: Vec<String> = want
                .iter()
                .map(|w| {
                    format!(
                        "{}({})",
                        w.name,
                        w.arguments
                            .clone()
                            .or(w.arguments_exact.clone())
                            .unwrap_or_default()
                    )
                })
                .collect();
            return Err(("tool calls".into(), wanted.join(", "), names.join(", ")));
        }
    }
    if let Some(called) = expect
        .not_called
        .iter()
        .find(|n| calls.iter().any(|(c, _)| c == *n))
    {
        return Err(fail(
            "tool that must not be called",
            format!("{called} not called"),
            format!("{called} called"),
        ));
    }
    Ok(())
}

fn check_reply(expect: &Expect, reply: &str, replies: &[String]) -> Result<(), Failure> {
    if let Some(want) = &expect.reply
        && reply != want
    {
        return Err(fail("reply", want, reply));
    }
    if let Some(part) = expect.reply_contains.iter().find(|p| !reply.contains(p.as_str())) {
        return Err(fail("reply contains", part, reply));
    }
    if let Some(pattern) = &expect.reply_regex {
        let re = regex::Regex::new(pattern).map_err(|e| fail("reply regex", pattern, e.to_string()))?;
        if !re.is_match(reply) {
            return Err(fail("reply regex", pattern, reply));
        }
    }
    if let Some(part) = expect
        .reply_not_contains
        .iter()
        .find(|p| reply.contains(p.as_str()))
    {
        return Err(fail("reply must not contain", part, reply));
    }
    if let Some(n) = expect.replies
        && n != replies.len()
    {
        return Err(fail("number of replies", n, replies.len()));
    }
    Ok(())
}

fn check_events(expect: &Expect, events: &[TurnEvent]) -> Result<(), Failure> {
    if let Some(want) = &expect.skill_changes {
        let got: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match e {
                TurnEvent::SkillChanged { from, to, .. } => Some((from.clone(), to.clone())),
                _ => None,
            })
            .collect();
        let want: Vec<(String, String)> = want.iter().map(|c| (c.from.clone(), c.to.clone())).collect();
        if want != got {
            return Err(fail("skill changes", want, got));
        }
    }
    if let Some(want) = &expect.system_functions {
        let got: Vec<&str> = events.iter().filter_map(TurnEvent::system_function).collect();
        if *want != got {
            return Err(fail("system functions", want, got));
        }
    }
    Ok(())
}

/// One expected request to the simulated systems, among those the turn made.
fn check_request(r: &ExpectRequest, ledger: &[LedgerEntry]) -> Result<(), Failure> {
    let matching: Vec<&LedgerEntry> = ledger
        .iter()
        .filter(|e| e.method.eq_ignore_ascii_case(&r.method) && e.path == r.path)
        .filter(|e| {
            r.headers.iter().all(|(k, v)| {
                k == "x-idempotency-key"
                    && e.idempotency_key
                        .as_deref()
                        .is_some_and(|key| v == "*" || key == v)
            })
        })
        .filter(|e| {
            r.body
                .as_ref()
                .is_none_or(|b| e.body.as_ref().is_some_and(|eb| partial_match(b, eb)))
        })
        .collect();
    let ok = match r.count {
        Some(n) => matching.len() == n,
        None => !matching.is_empty(),
    };
    if !ok {
        let seen: Vec<String> = ledger
            .iter()
            .map(|e| format!("{} {} → {}", e.method, e.path, e.status))
            .collect();
        return Err((
            "requests to the simulated systems".into(),
            format!(
                "{} {} × {}",
                r.method,
                r.path,
                r.count.map_or("≥1".into(), |n| n.to_string())
            ),
            format!(
                "{} matching; all requests this turn: [{}]",
                matching.len(),
                seen.join(", ")
            ),
        ));
    }
    Ok(())
}

fn check_ledger(expect: &Expect, ledger: &[LedgerEntry]) -> Result<(), Failure> {
    if let Some(l) = &expect.ledger {
        let charged = ledger
            .iter()
            .filter(|e| e.efeito == Some(vt_simulators::systems::Efeito::RecargaEfetivada))
            .count();
        let delivered = ledger
            .iter()
            .filter(|e| e.efeito == Some(vt_simulators::systems::Efeito::NotificacaoEntregue))
            .count();
        if let Some(n) = l.recharges
            && n != charged
        {
            return Err(fail("recharges charged this turn", n, charged));
        }
        if let Some(n) = l.notifications
            && n != delivered
        {
            return Err(fail("notifications delivered this turn", n, delivered));
        }
    }
    Ok(())
}

fn check_maps(expect: &Expect, conv: Option<&vt_engine::Conversation>) -> Result<(), Failure> {
    let empty = Map::new();
    for (label, want, have) in [
        ("state", &expect.state, conv.map_or(&empty, |c| &c.state)),
        ("memory", &expect.memory, conv.map_or(&empty, |c| &c.memory)),
    ] {
        for (k, v) in want {
            let actual = have.get(k);
            let ok = match (v, actual) {
                (Value::Null, None) | (Value::Null, Some(Value::Null)) => true,
                (v, Some(a)) => partial_match(v, a),
                _ => false,
            };
            if !ok {
                return Err(fail(&format!("{label}.{k}"), v, actual));
            }
        }
    }
    Ok(())
}

fn check_counts(expect: &Expect, seen: &Observed) -> Result<(), Failure> {
    let (model_calls, handled, execution) = (seen.model_calls, &seen.handled, seen.execution.as_ref());
    if let Some(n) = expect.model_calls
        && n != model_calls
    {
        return Err(fail("model calls", n, model_calls));
    }
    if let Some(max) = expect.max_tokens {
        let used = handled.tokens.0 + handled.tokens.1;
        if used > max {
            return Err(fail("tokens", format!("at most {max}"), used));
        }
    }
    if let Some(want) = &expect.status {
        let got = execution.map(|e| e.status.as_str());
        if got != Some(want.as_str()) {
            return Err(fail("execution status", want, got));
        }
    }
    Ok(())
}

/// What breaks `rule` in this turn, said for the report.
pub(super) fn violation(rule: &Never, turn: &Turn, seen: &Observed) -> Option<String> {
    match rule {
        Never::RechargeWithoutConfirmation => {
            let charged = seen
                .ledger
                .iter()
                .any(|e| e.efeito == Some(vt_simulators::systems::Efeito::RecargaEfetivada));
            let confirmed = seen
                .pending_before
                .as_ref()
                .is_some_and(|p| turn.messages().iter().any(|m| user_confirms(m, p)));
            (charged && !confirmed).then(|| {
                "a recharge was charged without the user's confirmation of a pending recharge".to_owned()
            })
        }
        Never::FullCardInReply => seen
            .replies
            .iter()
            .find(|r| mask_cards_in(r) != **r)
            .map(|r| format!("a reply shows a full card number: {r:?}")),
        Never::ReplyContains(s) => seen
            .replies
            .iter()
            .find(|r| r.contains(s.as_str()))
            .map(|r| format!("a reply contains {s:?}: {r:?}")),
        Never::ModelCallsAbove(max) => {
            (seen.model_calls > *max).then(|| format!("{} model calls (limit {max})", seen.model_calls))
        }
    }
}
