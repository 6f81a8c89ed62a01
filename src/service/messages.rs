//! A message's way through the service: accepted, routed, run under its conversation's lock, committed; recovered and spawned.

use super::*;

impl Messages<'_> {
    pub(super) async fn turn(&self, id: String, msg: &Inbound) -> Result<Handled, ServiceError> {
        let now = self.engine.now();
        // Everything the turn reads, read at once, before the message is stored (under the turn lock,
        // nothing else changes it).
        let mut reads = self.turn_reads(&id).await?;
        let msg = &question::resolve_tap(msg, reads.conversation.as_ref())?;
        let msg = &offers::resolve_pick(msg, reads.conversation.as_ref());
        let accepted = self
            .accept(&id, reads.conversation.take(), msg, now)
            .instrument(spans::step("accept"))
            .await?;
        let Some((conv, message_id)) = accepted else {
            return Ok(Handled::duplicate(id));
        };
        self.run_accepted(conv, msg, (message_id, reads), now).await
    }

    /// The conversation `id`, its compressed context and its open case
    /// ([`ConversationStore::turn_reads`](vt_store::ConversationStore::turn_reads)).
    pub(super) async fn turn_reads(&self, id: &str) -> Result<TurnReads, ServiceError> {
        self.conversations
            .turn_reads(id)
            .await
            .map_err(ServiceError::NotRecorded)
    }

    /// Steps 2–4 for a message already stored (`accepted`: its id, and what the turn read).
    pub(super) async fn run_accepted(
        &self,
        mut conv: Conversation,
        msg: &Inbound,
        accepted: (i64, TurnReads),
        now: DateTime<Utc>,
    ) -> Result<Handled, ServiceError> {
        let started = Instant::now();
        let (accepted_message, reads) = accepted;
        let context = reads.context;
        let deliver = msg.delivery == Delivery::Inline;
        let heard = self.hear(msg, accepted_message).await;
        let (msg, listened) = (heard.msg.as_ref(), heard.listened);
        if let Some(answer) = heard.answer {
            // Not processed at all: the engine never sees it (nor, later, the model in the window).
            let outcome = self.without_engine(&conv, &msg.text, Some(answer.text));
            let ran = Ran {
                outcome,
                routing: Routing::answered(answer.intent, answer.offer),
                context,
                started,
                now,
                accepted_message,
                held: None,
                listened,
            };
            return Ok(self.commit_traced(&mut conv, msg, ran, deliver).await);
        }
        // "PARAR" / "VOLTAR": consent to notices, whoever has the conversation.
        if let Some(opted_in) = consent::consent_words(self.speaker.channel(&conv.channel), &msg.text) {
            let ran_at = (now, started, accepted_message);
            return self.consent_turn(&mut conv, msg, opted_in, ran_at, context).await;
        }
        // A person has the conversation: the bot stays silent — but for the card holder's answer to a
        // recharge waiting for their confirmation, which only they can give.
        let in_case = match cases::in_case(reads.open_case, &conv, msg, now) {
            cases::InCase::Held(case) => {
                let ran_at = (now, started, accepted_message);
                return self.held_for_case(&mut conv, msg, *case, ran_at, context).await;
            }
            cases::InCase::Answered(write) => Some(*write),
            cases::InCase::NoCase => None,
        };
        // The compressed context stands in for the older history in the prompt.
        conv.memory.remove(OLD_CONTEXT_MEMORY_KEY);
        let compressed = context.as_ref().map(compressed);
        let route = spans::step("route");
        let (start, routing) = self.route(&mut conv, msg).instrument(route.clone()).await;
        routing.trace(&route);
        let outcome = self
            .taped_turn(
                &mut conv,
                TurnInput::new(&msg.text, start)
                    .answering(accepted_message.to_string())
                    .with_context(compressed),
            )
            .await?;
        let ran = Ran {
            outcome,
            routing,
            context,
            started,
            now,
            accepted_message,
            held: in_case,
            listened,
        };
        Ok(self.commit_traced(&mut conv, msg, ran, deliver).await)
    }

    /// Step 3 with a tape open: what the systems answer during the turn goes on record with it, for a
    /// replay's world (`vt-agent replay`).
    pub(super) async fn taped_turn(
        &self,
        conv: &mut Conversation,
        input: TurnInput<'_>,
    ) -> Result<vt_engine::TurnOutcome, ServiceError> {
        let tape = vt_connectors::tape::Tape::default();
        let mut outcome = tape.around(self.engine.run_turn(conv, input)).await?;
        outcome
            .events
            .extend(tape.take().into_iter().map(vt_engine::TurnEvent::Exchanged));
        Ok(outcome)
    }

    /// Step 4 in its span, then — for replies that go back in the answer — step 5's.
    pub(super) async fn commit_traced(
        &self,
        conv: &mut Conversation,
        msg: &Inbound,
        ran: Ran,
        deliver: bool,
    ) -> Handled {
        let span = spans::step("commit");
        let handled = self.commit(conv, msg, ran).instrument(span).await;
        if deliver {
            let span = spans::step("deliver");
            spans::output(&span, || serde_json::json!({"replies": handled.replies.len()}));
        }
        handled
    }

    pub(super) async fn process_locked(
        &self,
        msg: &Inbound,
        received: Received,
    ) -> Result<Handled, ServiceError> {
        let lock = self
            .conversations
            .lock_conversation(&received.conversation_id)
            .await;
        let result = match lock {
            Ok(lock) => {
                let result = self.process_in_order(msg, &received).await;
                lock.release().await;
                result
            }
            Err(e) => Err(ServiceError::NotRecorded(e)),
        };
        let left = self.inbox.release(received.message_id);
        match result {
            Ok(Some(handled)) => Ok(handled),
            // Processed while this task waited for the lock: by the task of a later message (the
            // outcome it left), or by another instance or a recovery.
            Ok(None) => left.unwrap_or_else(|| Ok(Handled::duplicate(received.conversation_id.clone()))),
            Err(e) => Err(e),
        }
    }

    /// Under the turn lock: the conversation's unprocessed messages up to `received` (with bursts
    /// joined: up to the last one, once the conversation has been quiet for `join_within`), oldest
    /// first, each stored turn's outcome to whoever waits for it. `None` when `received` itself was
    /// processed before.
    pub(super) async fn process_in_order(
        &self,
        msg: &Inbound,
        received: &Received,
    ) -> Result<Option<Handled>, ServiceError> {
        let joining = !received.join_within.is_zero();
        if joining {
            self.inbox
                .quiet(&received.conversation_id, received.join_within)
                .await;
        }
        let last = if joining { i64::MAX } else { received.message_id };
        let through = (received.conversation_id.as_str(), last);
        let stored = self
            .conversations
            .unprocessed_messages(Some(through), i64::MAX)
            .await
            .map_err(ServiceError::NotRecorded)?;
        if !stored.iter().any(|m| m.id == received.message_id) {
            return Ok(None);
        }
        if stored.len() == 1 {
            // The caller's message alone, the common case: its turn reads what it needs.
            let (conv, reads) = self.stored_conversation(&received.conversation_id).await?;
            return self
                .run_accepted(conv, msg, (received.message_id, reads), self.engine.now())
                .await
                .map(Some);
        }
        let (conv, _) = self.stored_conversation(&received.conversation_id).await?;
        // Nothing is joined while a recharge waits: any message may be its answer.
        let join = joining && vt_domain::tools::RecargaPendente::id_in(&conv.state).is_none();
        let pending = stored
            .iter()
            .map(|m| self.pending(&conv, m, (msg, received.message_id)))
            .collect();
        let mut own = None;
        for turn in bursts::turns(pending, join) {
            let outcome = self.run_stored(&received.conversation_id, &turn).await;
            own = own.or(self.hand_out(&received.conversation_id, &turn, outcome));
        }
        own.transpose()
    }

    /// Stored message `m` as its turn takes it: the caller's own, what its channel said of it when
    /// this process received it (its task waits for the outcome), else what the store kept.
    pub(super) fn pending(
        &self,
        conv: &Conversation,
        m: &UnprocessedMessage,
        own: (&Inbound, i64),
    ) -> bursts::Pending {
        let (msg, waiting) = if m.id == own.1 {
            (own.0.clone(), bursts::Waiting::Caller)
        } else {
            match self.inbox.take_received(m.id) {
                Some(msg) => (msg, bursts::Waiting::OtherTask),
                None => (inbound_of(conv, m), bursts::Waiting::Nobody),
            }
        };
        bursts::Pending {
            id: m.id,
            msg,
            waiting,
        }
    }

    /// Steps 2–4 of one stored turn: a message, or a burst joined into one.
    pub(super) async fn run_stored(
        &self,
        conversation: &str,
        turn: &[bursts::Pending],
    ) -> Result<Handled, ServiceError> {
        let (conv, reads) = self.stored_conversation(conversation).await?;
        let (Some(msg), Some(last)) = (bursts::joined(turn), turn.last()) else {
            return Ok(Handled::duplicate(conversation.to_owned()));
        };
        self.run_accepted(conv, &msg, (last.id, reads), self.engine.now())
            .await
    }

    /// A turn's outcome to whoever waits for it: returned for the caller, left in the inbox for
    /// another task (the others of a joined turn are told it was handled), logged when it failed and
    /// is not the caller's.
    pub(super) fn hand_out(
        &self,
        conversation: &str,
        turn: &[bursts::Pending],
        outcome: Result<Handled, ServiceError>,
    ) -> Option<Result<Handled, ServiceError>> {
        let caller = turn.iter().any(|p| p.waiting == bursts::Waiting::Caller);
        if let (false, Err(e)) = (caller, &outcome) {
            tracing::error!(error = %e, conversation = %conversation, "an earlier message failed");
        }
        let mut outcome = Some(outcome);
        let own = if caller { outcome.take() } else { None };
        for p in turn
            .iter()
            .rev()
            .filter(|p| p.waiting == bursts::Waiting::OtherTask)
        {
            let left = outcome
                .take()
                .unwrap_or_else(|| Ok(Handled::duplicate(conversation.to_owned())));
            self.inbox.leave(p.id, left);
        }
        own
    }

    /// A stored conversation, with what its turn reads.
    pub(super) async fn stored_conversation(
        &self,
        id: &str,
    ) -> Result<(Conversation, TurnReads), ServiceError> {
        let mut reads = self.turn_reads(id).await?;
        let conv = reads
            .conversation
            .take()
            .ok_or_else(|| ServiceError::NotFound(id.to_owned()))?;
        Ok((conv, reads))
    }

    /// A turn the engine never ran (a refused message, one held for a person): the user's message and,
    /// when there is one, the reply.
    pub(super) fn without_engine(
        &self,
        conv: &Conversation,
        user_text: &str,
        reply: Option<String>,
    ) -> TurnOutcome {
        let now = self.engine.now();
        let mut messages = vec![ChatMessage::user(user_text)];
        messages.extend(reply.iter().map(ChatMessage::assistant));
        TurnOutcome {
            execution: ExecutionRecord {
                execucao_id: self.engine.next_id("exec"),
                conversation_id: conv.id.clone(),
                agent_id: conv.agent_id.clone(),
                status: ExecutionStatus::Concluido,
                error: None,
                model_calls: Vec::new(),
                started_at: now,
                finished_at: now,
            },
            replies: reply
                .into_iter()
                .map(|text| Reply {
                    text,
                    files: Vec::new(),
                })
                .collect(),
            events: Vec::new(),
            messages,
            stages: Vec::new(),
            inner_runs: Vec::new(),
        }
    }
}

impl Messages<'_> {
    /// Runs `turn` in a task of its own, tracked: what a webhook does after it answers, or a request
    /// whose caller stopped waiting. [`Services::stopped`] waits for every one.
    pub fn spawn<F>(self, turn: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        // A turn's future is tens of kilobytes (every step's state, inline): boxed once here, the
        // task's cell and the tracker's wrapper move a pointer instead of copying it twice more
        // (`memmove` under `spawn` was ~2 % of `serve`'s CPU at 200 conversations).
        self.turns.spawn(Box::pin(turn))
    }

    /// Starts conversation `conv` on record, before its first message (HTTP's `POST /v1/conversations`).
    pub async fn open(self, conv: &Conversation) -> Result<(), StoreError> {
        self.conversations
            .save_conversation(conv, self.engine.now())
            .await
    }

    /// The conversation a message goes to (a new id when it names none), once its agent is known to
    /// exist: the check both ways in make before anything is stored.
    pub(super) fn conversation_of(&self, msg: &Inbound) -> Result<String, ServiceError> {
        if self.engine.catalog().agent(&msg.agent_id).is_none() {
            return Err(EngineError::UnknownAgent(msg.agent_id.clone()).into());
        }
        Ok(msg
            .conversation_id
            .clone()
            .unwrap_or_else(|| self.engine.next_id("conv")))
    }

    /// Handles one user message end to end: accept → route → run → commit, under the conversation's
    /// turn lock. One trace. The way in for a caller that waits for the answer (the terminal, HTTP, a
    /// slash command): [`Self::receive`] and [`Self::process`] fused under one lock, so the
    /// conversation is read once. A channel that must acknowledge first uses those two.
    pub async fn handle(self, msg: Inbound) -> Result<Handled, ServiceError> {
        let id = self.conversation_of(&msg)?;
        let scope = Scope {
            agent: &msg.agent_id,
            session: &id,
            user: &msg.user.user_id,
        };
        traced(&scope, &msg, async {
            let lock = self
                .conversations
                .lock_conversation(&id)
                .await
                .map_err(ServiceError::NotRecorded)?;
            let result = self.turn(id.clone(), &msg).await;
            // Released here on every path, errors included, so the next turn never waits for a lease.
            lock.release().await;
            result
        })
        .await
    }

    /// Step 1 alone, for channels that acknowledge a message before processing it (webhooks must
    /// answer fast): the message is stored — or recognised as a redelivery (`None`) — and nothing
    /// else happens yet. [`Self::process`] runs the rest.
    pub async fn receive(self, msg: &Inbound) -> Result<Option<Received>, ServiceError> {
        let id = self.conversation_of(msg)?;
        let stored = self
            .conversations
            .conversation(&id)
            .await
            .map_err(ServiceError::NotRecorded)?;
        let msg = question::resolve_tap(msg, stored.as_ref())?;
        let msg = offers::resolve_pick(&msg, stored.as_ref()).into_owned();
        let first = stored.is_none();
        let accepted = self.accept(&id, stored, &msg, self.engine.now()).await?;
        Ok(accepted.map(|(conv, message_id)| {
            self.inbox.hold(message_id, &id, msg.clone());
            Received {
                conversation_id: id,
                message_id,
                opened: first.then(|| Box::new(conv)),
                message: msg,
                join_within: std::time::Duration::ZERO,
            }
        }))
    }

    /// Says `text` in the conversation `received` opened, ahead of its turn's answer, outside any turn:
    /// a channel's greeting to a person's first message (WhatsApp's privacy notice). Stored as said, so
    /// the model knows it was said, and sent through the outbox before the answer the turn queues.
    /// Nothing for a message whose conversation was already there.
    pub async fn greet(self, received: &Received, text: &str) -> Result<(), ServiceError> {
        let Some(conv) = &received.opened else {
            return Ok(());
        };
        self.speaker
            .say_now(conv, text.to_owned(), None, Vec::new())
            .await
            .map_err(ServiceError::NotRecorded)
    }

    /// Steps 2–4 for a message [`Self::receive`] stored, under the conversation's turn lock. One
    /// trace.
    ///
    /// Messages are processed in the order they were stored, whichever task gets the lock first: the
    /// holder processes the conversation's earlier unprocessed messages before its own and leaves
    /// their outcomes for their own tasks (or, for a message this process did not receive, for
    /// nobody: its replies go out through the outbox all the same).
    pub async fn process(self, received: Received) -> Result<Handled, ServiceError> {
        let msg = &received.message;
        let scope = Scope {
            agent: &msg.agent_id,
            session: &received.conversation_id,
            user: &msg.user.user_id,
        };
        traced(&scope, msg, self.process_locked(msg, received.clone())).await
    }

    /// Processes what channels delivered, was acknowledged, and never got its turn (the process
    /// stopped in between). Called at start by `serve`; the replies go out through the outbox.
    pub async fn recover(self) -> usize {
        let pending = match self.conversations.unprocessed_messages(None, 1_000).await {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(error = %e, "unprocessed messages could not be read");
                return 0;
            }
        };
        let mut done = 0;
        for m in pending {
            let Ok(Some(conv)) = self.conversations.conversation(&m.conversation_id).await else {
                continue;
            };
            let received = Received {
                conversation_id: conv.id.clone(),
                message_id: m.id,
                opened: None,
                message: inbound_of(&conv, &m),
                join_within: std::time::Duration::ZERO,
            };
            match self.process(received).await {
                Ok(h) if !h.duplicate => done += 1,
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, conversation = %conv.id, "recovered message failed"),
            }
        }
        if done > 0 {
            tracing::info!(done, "messages accepted before a stop were processed");
        }
        done
    }
}
