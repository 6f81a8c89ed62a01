//! Step 2, **route**: the router decides how the turn starts — an action with known arguments, a fixed
//! reply (a question for a missing parameter, help), a plan for a composite request, or the model —
//! and what the turn is, for the usage metrics. Conversations of agents without a router go to the
//! model.

use serde_json::Value;

use super::{Inbound, IntentTag, Messages};
use crate::router::{ModelUse, Route, STATE_AGUARDANDO};
use vt_engine::{Conversation, TurnStart};

/// What routing decided besides the start: the classification and what deciding cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Routing {
    /// `None` when the agent has no router (tagged from the outcome instead).
    pub tag: Option<IntentTag>,
    /// The model was called to classify (not answered from the cache).
    pub classified: bool,
    /// Tokens spent routing and planning: `(input, output)`.
    pub tokens: (u64, u64),
    /// The reply restates the question of this waiting recharge (the router did not understand the
    /// message): a "sim" after it confirms that recharge.
    pub restated: Option<String>,
    /// A line the turn's answer ends with (the message was in English or Spanish).
    pub note: Option<&'static str>,
    /// What the turn's answer opens with: the balances read before a recharge asked in the same
    /// message.
    pub lead: Option<String>,
    /// Cards the answer offers to choose from (a photo's, or the remembered ones): kept for the next
    /// turn, shown as a list where the channel can.
    pub(super) offer: Option<super::offers::Offer>,
}

impl Routing {
    /// The decision on the `route` span: intent, level, by keyword or by the model, tokens.
    pub(super) fn trace(&self, span: &tracing::Span) {
        let (intent, level, keyword) = self.tag.as_ref().map_or(("", "model", false), |t| {
            (t.intent_key.as_str(), t.action_type.as_str(), t.keyword_matched)
        });
        let by = if keyword {
            "keyword"
        } else if self.classified {
            "model"
        } else if self.tag.is_some() {
            "cache"
        } else {
            "none"
        };
        vt_engine::telemetry::spans::routed(span, intent, level, by, self.tokens);
    }

    /// The router's `decision`, before the turn starts.
    fn decided(decision: &crate::router::Decision) -> Self {
        Self {
            tag: Some(IntentTag::new(
                &decision.intent,
                &decision.action_type,
                decision.keyword_matched,
            )),
            classified: decision.classified,
            tokens: decision.tokens,
            note: decision.note,
            ..Self::deterministic("", false)
        }
    }

    /// A message answered before routing (refused, or a media message heard): `intent` names the
    /// answer; it may offer cards.
    pub(super) fn answered(intent: &str, offer: Option<super::offers::Offer>) -> Self {
        Self {
            offer,
            ..Self::deterministic(intent, false)
        }
    }

    /// A turn the service answered itself, with no router and no model (zero tokens): held for a
    /// person, a consent, a support agent's proposal.
    pub(super) fn deterministic(intent: &str, keyword_matched: bool) -> Self {
        Self {
            tag: Some(IntentTag::new(intent, "deterministic", keyword_matched)),
            classified: false,
            tokens: (0, 0),
            restated: None,
            note: None,
            lead: None,
            offer: None,
        }
    }
}

impl Messages<'_> {
    /// Routes `msg` in `conv`; a question for a missing parameter is remembered in its state, and a
    /// tap on the waiting recharge's own button names it (`question::tapped`).
    pub(super) async fn route(&self, conv: &mut Conversation, msg: &Inbound) -> (TurnStart, Routing) {
        let text = msg.text.as_str();
        super::question::tapped(conv, msg.tap.as_ref());
        // The answer to the satisfaction question: its score stored, thanks, zero tokens.
        if let Some(answer) = super::outcomes::answer_to_survey(conv, msg) {
            let thanks = self.take_score(answer).await;
            return (
                TurnStart::Reply(thanks),
                Routing::deterministic(super::outcomes::SURVEY_INTENT, true),
            );
        }
        // The answer to a photo's proposal, whatever agent: the card becomes theirs, or is dropped.
        if let Some(reply) = super::offers::answer_to_photo(conv, msg) {
            return (
                TurnStart::Reply(reply),
                Routing::deterministic("cartao_da_foto", false),
            );
        }
        // The tenant's budget spent: no model call until the month turns or it is raised.
        let model = if self.spending.standing(&conv.tenant_id).await.model_allowed() {
            ModelUse::Allowed
        } else {
            ModelUse::OverBudget
        };
        let Some(router) = self.router.as_ref().filter(|r| r.agent() == conv.agent_id) else {
            if model == ModelUse::OverBudget {
                let reply = crate::router::over_budget_reply();
                return (
                    TurnStart::Reply(reply),
                    Routing::deterministic("orcamento_esgotado", false),
                );
            }
            let routing = Routing {
                tag: None,
                ..Routing::deterministic("", false)
            };
            return (TurnStart::Model, routing);
        };
        // A card the user writes is theirs from now on: the tools reach no other. What was on record
        // before it is kept apart: only those may be blocked or replaced without the holder's check.
        conv.state.insert(
            vt_domain::tools::cartao::STATE_ANTES_DA_MENSAGEM.into(),
            vt_domain::tools::cartao::on_record_now(&conv.memory),
        );
        vt_domain::tools::cartao::remember_written(&mut conv.memory, text);
        let mut decision = router.route_within(text, conv, model).await;
        // The offer of an automatic recharge stands for this one message: answered or not, it goes.
        conv.state.remove(vt_domain::tools::STATE_OFERTA_AUTOMATICA);
        if model == ModelUse::OverBudget && matches!(decision.route, Route::Model | Route::Plan) {
            decision.route = Route::Reply {
                text: crate::router::over_budget_reply(),
            };
        }
        let mut routing = Routing::decided(&decision);
        let start = self
            .start(conv, decision.route, (text, &decision.intent), &mut routing)
            .await;
        (start, routing)
    }

    /// How the turn starts on `route` (for `text`, of `intent`), and what that adds to `routing`: a
    /// question's waiting request kept in state (its cards offered), a restated recharge, a plan's
    /// tokens.
    async fn start(
        &self,
        conv: &mut Conversation,
        route: Route,
        (text, intent): (&str, &str),
        routing: &mut Routing,
    ) -> TurnStart {
        if let Route::Ask {
            question,
            awaiting,
            choose,
        } = route
        {
            routing.offer = (!choose.is_empty()).then_some(super::offers::Offer {
                cartoes: choose,
                foto: false,
            });
            conv.state.insert(
                STATE_AGUARDANDO.into(),
                vt_contract::json::to_value(awaiting).unwrap_or(Value::Null),
            );
            return TurnStart::Reply(question);
        }
        conv.state.remove(STATE_AGUARDANDO);
        match route {
            Route::Action { action, arguments } => TurnStart::Action {
                name: action,
                arguments,
            },
            Route::Reply { text } => TurnStart::Reply(text),
            Route::Restate { text, pending } => {
                routing.restated = Some(pending);
                TurnStart::Reply(text)
            }
            Route::ForgetCards { text } => {
                conv.memory.remove(vt_domain::tools::cartao::MEMORY_CARTOES);
                conv.state
                    .remove(vt_domain::tools::cartao::STATE_ANTES_DA_MENSAGEM);
                TurnStart::Reply(text)
            }
            Route::Plan => {
                let (reply, used) = self.plan(conv, text, intent).await;
                routing.tokens = (routing.tokens.0 + used.0, routing.tokens.1 + used.1);
                TurnStart::Reply(reply)
            }
            Route::EachCard { cards } => TurnStart::Reply(self.each_card(conv, text, &cards).await),
            Route::BalanceFirst { cards, then } => {
                routing.lead = Some(self.each_card(conv, text, &cards).await);
                Box::pin(self.start(conv, *then, (text, intent), routing)).await
            }
            Route::Model | Route::Ask { .. } => TurnStart::Model,
        }
    }

    /// Each card's balance (a plan code writes); the task run is stored (non-critical).
    async fn each_card(&self, conv: &Conversation, text: &str, cards: &[String]) -> String {
        let outcome =
            crate::planner::each_card(self.engine, conv, text, cards, self.engine.next_id("task")).await;
        if let Err(e) = self.conversations.save_task_run(&outcome.task).await {
            tracing::error!(error = %e, task = %outcome.task.id, "task run could not be stored");
        }
        outcome.reply
    }

    /// Plans and executes a hybrid request; the task run is stored (non-critical).
    async fn plan(&self, conv: &Conversation, text: &str, intent: &str) -> (String, (u64, u64)) {
        let record = self.router.as_ref().and_then(|r| r.intent(intent));
        let (Some(llm), Some(record)) = (self.engine.llm(), record) else {
            return (crate::planner::PLAN_FAILED_REPLY.into(), (0, 0));
        };
        let outcome = crate::planner::run(
            self.engine,
            llm.as_ref(),
            conv,
            text,
            record,
            self.engine.next_id("task"),
        )
        .await;
        if let Err(e) = self.conversations.save_task_run(&outcome.task).await {
            tracing::error!(error = %e, task = %outcome.task.id, "task run could not be stored");
        }
        (outcome.reply, outcome.tokens)
    }
}
